//! JSON in and out, for host tools.
//!
//! The document mirrors the text format one to one — the target, the
//! declarations, and the function / loop / block / instruction tree — so it
//! is the same model in another syntax, not a second IR: [`to_json`] walks
//! the module's columns like the printer does, and [`from_json`] builds a
//! module through the same public API and checks as the text parser.
//! Text → JSON → text is the identity on canonical text.
//!
//! Access patterns are written in their explicit form (partition range,
//! offset, element size, dims) so tools need no short-form rules. The
//! reader accepts every module the text format accepts (loops nested as
//! deep as `Limits::loop_depth`): a scan of the raw bytes first refuses
//! nesting deeper than such a module's document can reach
//! ([`max_json_depth`]), with its line and column, so serde's recursive
//! descent only ever sees bounded depth; it runs on a thread of its own
//! with a stack sized for that depth.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use tusk_core::ir::{
    types, ApSpec, Block, DType, Dim, Engine, Func, Inst, InstFlags, InstSpec, IvTerm, Limits,
    Loop, MemFlags, Module, Opcode, Reg, RegFlags, RegTerm, Space, SubOp, MAX_DIMS, MAX_IV_TERMS,
    NO_BANK, NO_LANE, NO_PARTITION, UNKNOWN_TRIP,
};
use tusk_core::Target;

use crate::text::printer::{ap_spec, default_align};
use crate::text::walk::{walk, Event};

/// A module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonModule {
    /// The target.
    pub target: JsonTarget,
    /// Memory locations, in declaration order.
    #[serde(default)]
    pub mems: Vec<JsonMem>,
    /// Registers, in declaration order.
    #[serde(default)]
    pub regs: Vec<JsonReg>,
    /// Functions.
    #[serde(default)]
    pub funcs: Vec<JsonFunc>,
}

/// The `target` line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonTarget {
    /// `trn1`, `inf2`, `trn2` or `trn3`.
    pub preset: String,
    /// Overrides (`max-regs`, `psum-banks`, …) that differ from the preset.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overrides: BTreeMap<String, u64>,
}

/// A memory location declaration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonMem {
    /// Name without `%`.
    pub name: String,
    /// `dram`, `sb` or `psum`.
    pub space: String,
    /// Partitions.
    pub partitions: u16,
    /// Bytes per partition.
    pub bytes: u32,
    /// Element size (default 1; the type's size when `dtype` is given).
    #[serde(default = "one")]
    pub elem_size: u8,
    /// Element type (`fp32`, `bf16`, …); absent for an untyped `elem N`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// Alignment (default: the space minimum or the element size).
    #[serde(default)]
    pub align: Option<u32>,
    /// Flag words (`input`, `output`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// The placement, once placed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<JsonPlacement>,
}

fn one() -> u8 {
    1
}

/// Where a location was placed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonPlacement {
    /// First partition (DRAM: 0).
    pub partition: u16,
    /// Byte offset (PSUM: bank × bank bytes + offset in the bank; DRAM: the
    /// address).
    pub offset: u64,
}

/// A register declaration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonReg {
    /// Name without `$`.
    pub name: String,
    /// 1 or 2.
    pub lanes: u8,
    /// Flag words (`pinned`, `spilltemp`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// First physical lane once colored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<u16>,
}

/// A function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonFunc {
    /// Name without `@`.
    pub name: String,
    /// Blocks and loops in layout order.
    pub body: Vec<JsonItem>,
}

/// A block or a loop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JsonItem {
    /// A labeled block.
    Block(JsonBlock),
    /// A loop.
    Loop(JsonLoop),
}

/// A block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonBlock {
    /// Label.
    pub label: String,
    /// Instructions in order.
    #[serde(default)]
    pub insts: Vec<JsonInst>,
}

/// A loop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonLoop {
    /// The induction variable's name (what loop terms name); absent when
    /// unnamed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Trip count; absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trip: Option<u32>,
    /// Blocks and nested loops.
    pub body: Vec<JsonItem>,
}

/// An instruction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonInst {
    /// Mnemonic.
    pub op: String,
    /// Sub-operation keyword.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subop: Option<String>,
    /// Engine, when not the opcode's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// DMA queue.
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub queue: u8,
    /// Immediate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imm: Option<i64>,
    /// Flag words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// Written access patterns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<JsonAp>,
    /// Defined registers (names without `$`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub defs: Vec<String>,
    /// Read access patterns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<JsonAp>,
    /// Used registers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uses: Vec<String>,
}

fn is_zero_u8(v: &u8) -> bool {
    *v == 0
}

/// An access pattern, explicit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonAp {
    /// Location name without `%`.
    pub loc: String,
    /// First partition relative to the location.
    pub part_start: u16,
    /// Partitions.
    pub part_count: u16,
    /// Byte offset.
    pub offset: u32,
    /// Element size.
    pub elem_size: u8,
    /// `[stride, count]` pairs, outermost first, strides in elements.
    pub dims: Vec<(i32, u32)>,
    /// Partition step (on chip 0 or 1; DRAM: bytes between partitions);
    /// absent for the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pstep: Option<u32>,
    /// Loop terms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub terms: Vec<JsonTerm>,
    /// The register term.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reg: Option<JsonRegTerm>,
}

/// A loop term: `parts × k` partitions and `bytes × k` bytes, `k = iv` or
/// `iv mod wrap`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonTerm {
    /// The name of an enclosing loop's variable.
    #[serde(rename = "loop")]
    pub lp: String,
    /// Partitions per iteration.
    #[serde(default)]
    pub parts: i16,
    /// Bytes per iteration.
    #[serde(default)]
    pub bytes: i64,
    /// 0 (absent): affine; `N ≥ 2`: the term moves by `iv mod N` (a tile
    /// buffered `N` deep).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wrap: u16,
}

fn is_zero(x: &u16) -> bool {
    *x == 0
}

/// A register term: `scale × value(uses[use])` bytes, in the window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonRegTerm {
    /// Index into the instruction's `uses`.
    #[serde(rename = "use")]
    pub use_index: u8,
    /// Bytes per unit of the register's value.
    pub scale: i32,
    /// `[lo, hi)`: the bytes of each partition row every access stays in.
    pub window: (u32, u32),
}

/// A JSON input that could not become a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    /// Not JSON, or not the document's shape (with serde_json's line and
    /// column).
    Syntax {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
        /// serde_json's message.
        msg: String,
    },
    /// Well-formed JSON whose content the model refuses.
    Model {
        /// Where: `funcs[0].body[2]...`.
        path: String,
        /// What.
        msg: String,
    },
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Syntax { line, col, msg } => write!(f, "{line}:{col}: {msg}"),
            JsonError::Model { path, msg } => write!(f, "at {path}: {msg}"),
        }
    }
}

impl std::error::Error for JsonError {}

// ----------------------------------------------------------------------
// Module → JSON

/// The JSON document of a module.
pub fn to_json(m: &Module) -> JsonModule {
    let target = JsonTarget {
        preset: m.target.generation.name().into(),
        overrides: m
            .target
            .overrides()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    };
    let mems = m
        .mems()
        .space
        .keys()
        .map(|x| JsonMem {
            name: m.mem_name(x).into(),
            space: m.mems().space[x].keyword().into(),
            partitions: m.mems().partitions[x],
            bytes: m.mems().bytes[x],
            elem_size: m.elem_size(x),
            dtype: m.mems().dtype[x].keyword().map(String::from),
            align: Some(m.mems().align[x]),
            flags: words(types::MEM_FLAG_WORDS.iter(), |f| {
                m.mems().flags[x].contains(*f)
            }),
            placement: m.is_placed(x).then(|| JsonPlacement {
                partition: m.mems().base_partition[x],
                offset: m.mems().offset[x],
            }),
        })
        .collect();
    let regs = m
        .regs()
        .lanes
        .keys()
        .map(|r| JsonReg {
            name: m.reg_name(r).into(),
            lanes: m.regs().lanes[r],
            flags: words(types::REG_FLAG_WORDS.iter(), |f| {
                m.regs().flags[r].contains(*f)
            }),
            lane: (m.regs().lane[r] != NO_LANE).then_some(m.regs().lane[r]),
        })
        .collect();
    let mut funcs = Vec::new();
    // An explicit stack of open bodies: the walk is flat, the tree is built
    // here without recursion.
    // Per open body: its loop (INVALID for the function) with its trip
    // count, and the items so far.
    type Open = ((Loop, Option<u32>), Vec<JsonItem>);
    let mut stack: Vec<Open> = Vec::new();
    let mut cur_name = String::new();
    walk(m, |e| match e {
        Event::FuncStart(f) => {
            cur_name = m.func_name(f).into();
            stack.clear();
            stack.push(((Loop::INVALID, None), Vec::new()));
        }
        Event::LoopOpen(l, _) => {
            let trip = m.loops().trip[l];
            stack.push(((l, (trip != UNKNOWN_TRIP).then_some(trip)), Vec::new()));
        }
        Event::Block(b, _) => {
            let insts = m.block_insts(b).map(|i| inst_json(m, i)).collect();
            if let Some((_, body)) = stack.last_mut() {
                body.push(JsonItem::Block(JsonBlock {
                    label: m.block_name(b).into(),
                    insts,
                }));
            }
        }
        Event::LoopClose(_) => {
            if stack.len() > 1 {
                if let Some(((l, trip), body)) = stack.pop() {
                    if let Some((_, parent)) = stack.last_mut() {
                        parent.push(JsonItem::Loop(JsonLoop {
                            name: m.loop_name(l).map(String::from),
                            trip,
                            body,
                        }));
                    }
                }
            }
        }
        Event::FuncEnd(_) => {
            let body = stack.pop().map(|(_, b)| b).unwrap_or_default();
            funcs.push(JsonFunc {
                name: std::mem::take(&mut cur_name),
                body,
            });
        }
    });
    JsonModule {
        target,
        mems,
        regs,
        funcs,
    }
}

fn words<'a, F: 'a>(
    table: impl Iterator<Item = &'a (F, &'static str)>,
    has: impl Fn(&F) -> bool,
) -> Vec<String> {
    table
        .filter(|(f, _)| has(f))
        .map(|(_, w)| (*w).to_string())
        .collect()
}

fn inst_json(m: &Module, i: Inst) -> JsonInst {
    let op = m.insts().opcode[i];
    let imm = m.imm(i);
    let engine = m.insts().engine[i];
    let sub = m.insts().subop[i];
    let ap = |a| {
        let s = ap_spec(m, a);
        JsonAp {
            loc: m.mem_name(s.loc).into(),
            part_start: s.part_start,
            part_count: s.part_count,
            offset: s.offset,
            elem_size: s.elem_size,
            dims: s.dims.iter().map(|d| (d.stride, d.count)).collect(),
            pstep: s.ext.pstep,
            terms: s
                .ext
                .terms
                .iter()
                .map(|t| JsonTerm {
                    lp: m.loop_name(t.lp).unwrap_or_default().into(),
                    parts: t.parts,
                    bytes: t.bytes,
                    wrap: t.wrap,
                })
                .collect(),
            reg: s.ext.reg.map(|r| JsonRegTerm {
                use_index: r.use_index,
                scale: r.scale,
                window: (r.window_lo, r.window_hi),
            }),
        }
    };
    JsonInst {
        op: op.mnemonic().into(),
        subop: (sub != SubOp::None).then(|| sub.keyword().into()),
        engine: (engine != op.default_engine()).then(|| engine.keyword().into()),
        queue: m.insts().queue[i],
        imm: (imm != 0 || matches!(op, Opcode::ScalarImm | Opcode::Memset)).then_some(imm),
        flags: words(types::INST_FLAG_WORDS.iter(), |f| {
            m.insts().flags[i].contains(*f)
        }),
        outputs: m.outputs(i).map(ap).collect(),
        defs: m.defs(i).iter().map(|&r| m.reg_name(r).into()).collect(),
        inputs: m.inputs(i).map(ap).collect(),
        uses: m.uses(i).iter().map(|&r| m.reg_name(r).into()).collect(),
    }
}

/// The module as compact JSON text on one line (ends with a newline).
pub fn to_json_string(m: &Module) -> String {
    let mut s = serde_json::to_string(&to_json(m)).unwrap_or_else(|e| {
        // Serializing plain structs of strings and integers cannot fail;
        // keep the driver honest if it ever does.
        format!("{{\"error\": \"{e}\"}}")
    });
    s.push('\n');
    s
}

// ----------------------------------------------------------------------
// JSON → Module

/// Arrays and objects around the module's body: the document, `funcs`, a
/// function, its `body`.
const ROOT_LEVELS: usize = 4;
/// Levels one loop adds: the item (`{"loop": ...}`), the loop, its `body`.
const LEVELS_PER_LOOP: usize = 3;
/// Levels of a block at the bottom: the item, the block, `insts`, an
/// instruction, `inputs`, an access pattern, `dims`, one `[stride, count]`.
const BLOCK_LEVELS: usize = 8;

/// The deepest nesting of arrays and objects in the document of a module
/// the text format accepts (loops `Limits::loop_depth` deep).
pub fn max_json_depth() -> usize {
    ROOT_LEVELS + LEVELS_PER_LOOP * Limits::default().loop_depth as usize + BLOCK_LEVELS
}

/// Stack for serde's descent through [`max_json_depth`] levels: a few
/// frames of at most some KiB per level even unoptimized, with a wide
/// margin (the stack is reserved, only the pages touched are used).
const PARSE_STACK_BYTES: usize = 64 << 20;

/// The first place where `bytes` nests arrays and objects deeper than
/// `limit`, as a syntax error at its line and column. Strings are skipped
/// (their brackets do not count); anything malformed is left to serde.
fn check_depth(bytes: &[u8], limit: usize) -> Result<(), JsonError> {
    let (mut depth, mut line, mut col) = (0usize, 1usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in bytes {
        // Columns count characters: skip UTF-8 continuation bytes.
        if b & 0xC0 != 0x80 {
            col += 1;
        }
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Err(JsonError::Syntax {
                        line,
                        col,
                        msg: format!(
                            "arrays and objects nested more than {limit} deep: deeper than any \
                             module's document (loops nest at most {} deep)",
                            Limits::default().loop_depth
                        ),
                    });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'\n' => {
                line += 1;
                col = 0;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Parses a JSON document into a module.
pub fn parse_json(bytes: &[u8]) -> Result<Module, JsonError> {
    check_depth(bytes, max_json_depth())?;
    let syntax = |e: serde_json::Error| JsonError::Syntax {
        line: e.line(),
        col: e.column(),
        msg: e.to_string(),
    };
    let descend = || -> Result<JsonModule, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        // The depth is bounded by `check_depth` above.
        de.disable_recursion_limit();
        let doc = JsonModule::deserialize(&mut de)?;
        de.end()?;
        Ok(doc)
    };
    let doc = std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("tusk-json".into())
            .stack_size(PARSE_STACK_BYTES)
            .spawn_scoped(s, descend)
            .map(|h| h.join())
    });
    let doc = match doc {
        Ok(Ok(r)) => r.map_err(syntax)?,
        // No thread could be started (or it panicked, which serde does
        // not): the descent on this thread is bounded all the same.
        _ => descend().map_err(syntax)?,
    };
    from_json(&doc)
}

fn model(path: impl Into<String>, msg: impl Into<String>) -> JsonError {
    JsonError::Model {
        path: path.into(),
        msg: msg.into(),
    }
}

/// True for names the text format can spell: `[A-Za-z_][A-Za-z0-9_.]*`.
fn valid_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= tusk_core::ir::names::MAX_NAME_LEN
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.')
}

fn check_name(path: &str, s: &str) -> Result<(), JsonError> {
    if valid_name(s) {
        Ok(())
    } else {
        Err(model(
            path,
            format!("`{s}` is not a valid name (`[A-Za-z_][A-Za-z0-9_.]*`, at most 256 bytes)"),
        ))
    }
}

fn flag<F: Copy>(
    path: &str,
    table: &[(F, &'static str)],
    w: &str,
    known: &str,
) -> Result<F, JsonError> {
    table
        .iter()
        .find(|(_, s)| *s == w)
        .map(|(f, _)| *f)
        .ok_or_else(|| model(path, format!("unknown flag `{w}` (known: {known})")))
}

/// Builds a module from a JSON document, with the text parser's checks.
pub fn from_json(doc: &JsonModule) -> Result<Module, JsonError> {
    let mut target = Target::by_name(&doc.target.preset).ok_or_else(|| {
        model(
            "target.preset",
            format!(
                "unknown target `{}` (known: trn1 inf2 trn2 trn3)",
                doc.target.preset
            ),
        )
    })?;
    for (k, &v) in &doc.target.overrides {
        target
            .set(k, v)
            .map_err(|e| model(format!("target.overrides.{k}"), e.to_string()))?;
    }
    let mut m = Module::new(target);
    for (i, j) in doc.mems.iter().enumerate() {
        let path = format!("mems[{i}]");
        check_name(&path, &j.name)?;
        let space = Space::from_keyword(&j.space).ok_or_else(|| {
            model(
                &path,
                format!("unknown space `{}` (known: dram sb psum)", j.space),
            )
        })?;
        if m.mem_by_name(&j.name).is_some() {
            return Err(model(
                &path,
                format!("location `%{}` is declared twice", j.name),
            ));
        }
        let dtype = match &j.dtype {
            None => DType::Raw(j.elem_size),
            Some(k) => {
                let t = DType::from_keyword(k).ok_or_else(|| {
                    model(
                        &path,
                        format!("unknown element type `{k}` (known: fp32 bf16 fp16 fp8e4m3 fp8e5m2 int32 int16 int8 uint8)"),
                    )
                })?;
                if j.elem_size != 1 && j.elem_size != t.size() {
                    return Err(model(
                        &path,
                        format!(
                            "element size {} disagrees with type {k} ({} bytes)",
                            j.elem_size,
                            t.size()
                        ),
                    ));
                }
                t
            }
        };
        let es = dtype.size();
        if es != 0 && j.bytes % es as u32 != 0 {
            return Err(model(
                &path,
                format!(
                    "%{} has {} bytes per partition, not a multiple of its element size {}",
                    j.name, j.bytes, es
                ),
            ));
        }
        let ir = |e: tusk_core::ir::IrError| model(&path, e.to_string());
        let x = m
            .add_mem(&j.name, space, j.partitions, j.bytes)
            .map_err(ir)?;
        m.set_dtype(x, dtype).map_err(ir)?;
        let align = j.align.unwrap_or(default_align(&m, space, es));
        m.set_align(x, align).map_err(ir)?;
        let mut flags = MemFlags::empty();
        for w in &j.flags {
            flags |= flag(
                &path,
                &types::MEM_FLAG_WORDS,
                w,
                "input output pinned spill internal reload",
            )?;
        }
        m.set_mem_flags(x, flags);
        if let Some(p) = &j.placement {
            if p.partition == NO_PARTITION || p.offset == u64::MAX {
                return Err(model(&path, "placement out of range"));
            }
            if space == Space::Dram && p.partition != 0 {
                return Err(model(&path, "a DRAM placement has partition 0"));
            }
            if space == Space::Psum {
                let bank = p.offset / m.target.psum_bank_bytes.max(1) as u64;
                if bank >= NO_BANK as u64 {
                    return Err(model(
                        &path,
                        format!("PSUM bank {bank} is out of range (must be 0..=254)"),
                    ));
                }
            }
            m.place(x, p.partition, p.offset);
        }
    }
    for (i, j) in doc.regs.iter().enumerate() {
        let path = format!("regs[{i}]");
        check_name(&path, &j.name)?;
        if m.reg_by_name(&j.name).is_some() {
            return Err(model(
                &path,
                format!("register `${}` is declared twice", j.name),
            ));
        }
        let r = m
            .add_reg(&j.name, j.lanes)
            .map_err(|e| model(&path, e.to_string()))?;
        let mut flags = RegFlags::empty();
        for w in &j.flags {
            flags |= flag(&path, &types::REG_FLAG_WORDS, w, "pinned spilltemp")?;
        }
        m.set_reg_flags(r, flags);
        if let Some(l) = j.lane {
            if l == NO_LANE {
                return Err(model(&path, "lane out of range"));
            }
            m.set_reg_lane(r, l);
        }
    }
    let mut b = BodyBuilder::default();
    for (fi, jf) in doc.funcs.iter().enumerate() {
        let path = format!("funcs[{fi}]");
        check_name(&path, &jf.name)?;
        if m.func_by_name(&jf.name).is_some() {
            return Err(model(
                &path,
                format!("function `@{}` is declared twice", jf.name),
            ));
        }
        let f = m
            .add_func(&jf.name)
            .map_err(|e| model(&path, e.to_string()))?;
        b.func(&mut m, f, &path, &jf.body)?;
    }
    Ok(m)
}

/// Builds function bodies from the JSON tree with an explicit stack.
#[derive(Default)]
struct BodyBuilder {
    /// Per name index: 1 + the function whose block label it is.
    label_stamp: Vec<u32>,
    ins: Vec<ApSpec>,
    outs: Vec<ApSpec>,
    uses: Vec<Reg>,
    defs: Vec<Reg>,
    /// The loops open around the current block, outermost first.
    open: Vec<Loop>,
}

impl BodyBuilder {
    fn func(
        &mut self,
        m: &mut Module,
        f: Func,
        path: &str,
        body: &[JsonItem],
    ) -> Result<(), JsonError> {
        // (items, next index, the loop they belong to, its path)
        let mut stack: Vec<(&[JsonItem], usize, Loop, String)> =
            vec![(body, 0, Loop::INVALID, format!("{path}.body"))];
        while let Some(top) = stack.last_mut() {
            let (items, k, lp) = (top.0, top.1, top.2);
            let Some(item) = items.get(k) else {
                let Some((_, _, l, p)) = stack.pop() else {
                    break;
                };
                if l.is_valid() && m.loops().first_block[l] == m.loops().end_block[l] {
                    return Err(model(p, "empty loop: a loop must hold at least one block"));
                }
                continue;
            };
            top.1 += 1;
            let ipath = format!("{}[{k}]", top.3);
            match item {
                JsonItem::Loop(jl) => {
                    let limit = m.limits.loop_depth;
                    if stack.len() > limit as usize {
                        return Err(model(
                            ipath,
                            format!("loops nested too deeply (the limit is {limit} levels)"),
                        ));
                    }
                    let trip = jl.trip.unwrap_or(UNKNOWN_TRIP);
                    let l = m
                        .add_loop(lp, trip)
                        .map_err(|e| model(&ipath, e.to_string()))?;
                    if let Some(name) = &jl.name {
                        check_name(&ipath, name)?;
                        m.set_loop_name(l, name)
                            .map_err(|e| model(&ipath, e.to_string()))?;
                    }
                    stack.push((&jl.body, 0, l, format!("{ipath}.loop.body")));
                }
                JsonItem::Block(jb) => {
                    self.open.clear();
                    self.open
                        .extend(stack.iter().map(|t| t.2).filter(|l| l.is_valid()));
                    self.block(m, f, lp, &ipath, jb)?
                }
            }
        }
        Ok(())
    }

    fn block(
        &mut self,
        m: &mut Module,
        f: Func,
        lp: Loop,
        path: &str,
        jb: &JsonBlock,
    ) -> Result<(), JsonError> {
        check_name(path, &jb.label)?;
        let stamp = f.as_u32() + 1;
        if let Some(n) = m.names().lookup(&jb.label) {
            if self.label_stamp.get(n.index()) == Some(&stamp) {
                return Err(model(
                    path,
                    format!("block label `{}` is declared twice", jb.label),
                ));
            }
        }
        let b = m
            .add_block(&jb.label, lp)
            .map_err(|e| model(path, e.to_string()))?;
        let n = m.blocks().name[b].index();
        if self.label_stamp.len() <= n {
            self.label_stamp.resize(m.names().len().max(n + 1), 0);
        }
        self.label_stamp[n] = stamp;
        for (k, ji) in jb.insts.iter().enumerate() {
            self.inst(m, b, &format!("{path}.block.insts[{k}]"), ji)?;
        }
        Ok(())
    }

    fn inst(
        &mut self,
        m: &mut Module,
        b: Block,
        path: &str,
        j: &JsonInst,
    ) -> Result<(), JsonError> {
        let op = Opcode::from_mnemonic(&j.op)
            .ok_or_else(|| model(path, format!("unknown opcode `{}`", j.op)))?;
        let mut spec = InstSpec::new(op);
        if let Some(s) = &j.subop {
            let sub = SubOp::from_keyword(s)
                .filter(|s| crate::text::subop_fits(op, *s))
                .ok_or_else(|| {
                    let known = crate::text::subops_of(op);
                    match SubOp::from_keyword(s) {
                        Some(_) => model(
                            path,
                            format!("`{s}` is not a sub-operation of `{}` (its sub-operations: {known})", j.op),
                        ),
                        None if known.is_empty() => {
                            model(path, format!("`{}` takes no sub-operation, found `{s}`", j.op))
                        }
                        None => model(
                            path,
                            format!("unknown {} subop `{s}` (known: {known})", j.op),
                        ),
                    }
                })?;
            spec.subop = sub;
        }
        if let Some(e) = &j.engine {
            spec.engine = Engine::from_keyword(e).ok_or_else(|| {
                model(
                    path,
                    format!("unknown engine `{e}` (known: pe act dve pool sp dma)"),
                )
            })?;
        }
        spec.queue = j.queue;
        if matches!(op, Opcode::ScalarImm | Opcode::Memset) && j.imm.is_none() {
            return Err(model(path, format!("`{}` needs an immediate", j.op)));
        }
        spec.imm = j.imm.unwrap_or(0);
        let mut flags = InstFlags::empty();
        for w in &j.flags {
            flags |= flag(
                path,
                &types::INST_FLAG_WORDS,
                w,
                "inplace uninit spill reload synthetic",
            )?;
        }
        spec.flags = flags;
        self.ins.clear();
        self.outs.clear();
        self.uses.clear();
        self.defs.clear();
        for (k, a) in j.inputs.iter().enumerate() {
            self.ins
                .push(ap(m, &self.open, &format!("{path}.inputs[{k}]"), a)?);
        }
        for (k, a) in j.outputs.iter().enumerate() {
            self.outs
                .push(ap(m, &self.open, &format!("{path}.outputs[{k}]"), a)?);
        }
        for r in &j.uses {
            self.uses.push(
                m.reg_by_name(r)
                    .ok_or_else(|| model(path, format!("undefined register `${r}`")))?,
            );
        }
        for r in &j.defs {
            self.defs.push(
                m.reg_by_name(r)
                    .ok_or_else(|| model(path, format!("undefined register `${r}`")))?,
            );
        }
        spec.inputs = &self.ins;
        spec.outputs = &self.outs;
        spec.uses = &self.uses;
        spec.defs = &self.defs;
        let i = m
            .append_inst(b, &spec)
            .map_err(|e| model(path, e.to_string()))?;
        tusk_core::ir::shape::check(m, i).map_err(|e| model(path, format!("`{}` {e}", j.op)))?;
        Ok(())
    }
}

fn ap(m: &Module, open: &[Loop], path: &str, j: &JsonAp) -> Result<ApSpec, JsonError> {
    let loc = m
        .mem_by_name(&j.loc)
        .ok_or_else(|| model(path, format!("undefined location `%{}`", j.loc)))?;
    let parts = m.mems().partitions[loc] as u32;
    let end = j.part_start as u32 + j.part_count as u32;
    // A DRAM pattern with a partition step is checked by its flat extent.
    let max_end = if j.pstep.is_some() && m.mems().space[loc] == Space::Dram {
        tusk_core::ir::MAX_AP_PARTITIONS as u32
    } else {
        parts
    };
    if j.part_count == 0 || end > max_end {
        return Err(model(
            path,
            format!(
                "partitions [{}, {end}) are outside %{}'s {parts} partitions (or empty)",
                j.part_start, j.loc
            ),
        ));
    }
    if j.elem_size == 0 || !j.elem_size.is_power_of_two() || j.elem_size > 16 {
        return Err(model(
            path,
            format!("element size {} is not one of 1, 2, 4, 8, 16", j.elem_size),
        ));
    }
    if j.dims.is_empty() || j.dims.len() > MAX_DIMS {
        return Err(model(
            path,
            format!(
                "an access pattern has 1..={MAX_DIMS} dims, not {}",
                j.dims.len()
            ),
        ));
    }
    let spec = ApSpec {
        loc,
        part_start: j.part_start,
        part_count: j.part_count,
        offset: j.offset,
        elem_size: j.elem_size,
        dims: j.dims.iter().map(|&(s, c)| Dim::new(s, c)).collect(),
        ext: Default::default(),
    };
    let mut spec = spec;
    spec.ext.pstep = j.pstep;
    for (k, t) in j.terms.iter().enumerate() {
        let lp = open
            .iter()
            .rev()
            .copied()
            .find(|&l| m.loop_name(l) == Some(t.lp.as_str()))
            .ok_or_else(|| {
                model(
                    format!("{path}.terms[{k}]"),
                    format!("`{}` is not the variable of an enclosing loop", t.lp),
                )
            })?;
        let term = IvTerm {
            wrap: t.wrap,
            ..IvTerm::affine(lp, t.parts, t.bytes)
        };
        if spec.ext.terms.try_push(term).is_err() {
            return Err(model(
                path,
                format!("more than {MAX_IV_TERMS} loop terms in one access pattern"),
            ));
        }
    }
    spec.ext.reg = j.reg.as_ref().map(|r| RegTerm {
        use_index: r.use_index,
        scale: r.scale,
        window_lo: r.window.0,
        window_hi: r.window.1,
    });
    crate::text::check_extent(m, &spec).map_err(|msg| model(path, msg))?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text;

    const SRC: &str = "target trn2 max-regs=62

dram %x [128 x 8192] elem 4 input
sb %t [128 x 8192] elem 4 align 64 @ SB<0,1024>
psum %acc [128 x 2048] elem 4 @ PSUM<0,bank 3+64>
reg $k 2 pinned @ r4

func @main {
entry:
  %t = load %x queue 1
  loop ? {
  body:
    %acc = matmul %t[p0:64, +4, e2, [-1,2] [1,64]], %t[p0:64, 0:2048]
  }
block2:
  $k = imm -5 synthetic
}
";

    #[test]
    fn text_json_text_is_the_identity() {
        let m = text::parse_str(SRC).unwrap();
        assert_eq!(text::print(&m), SRC);
        let js = to_json_string(&m);
        let back = parse_json(js.as_bytes()).unwrap();
        assert_eq!(text::print(&back), SRC);
        assert_eq!(to_json(&back), to_json(&m));
    }

    #[test]
    fn json_errors_name_the_path() {
        let m = text::parse_str(SRC).unwrap();
        let mut doc = to_json(&m);
        if let JsonItem::Block(b) = &mut doc.funcs[0].body[0] {
            b.insts[0].inputs[0].loc = "nope".into();
        }
        let e = from_json(&doc).unwrap_err().to_string();
        assert!(
            e.contains("funcs[0].body[0].block.insts[0].inputs[0]"),
            "{e}"
        );
        assert!(e.contains("undefined location `%nope`"), "{e}");
        let e = parse_json(b"{\"target\": 3}").unwrap_err();
        assert!(matches!(e, JsonError::Syntax { line: 1, .. }), "{e}");
    }

    #[test]
    fn json_subop_errors_list_the_opcodes_subops() {
        let src = "sb %a [128 x 4]\nfunc @main {\nentry:\n  %a = tensor_tensor add %a, %a\n}\n";
        let m = text::parse_str(src).unwrap();
        let with_subop = |sub: &str| {
            let mut doc = to_json(&m);
            let JsonItem::Block(b) = &mut doc.funcs[0].body[0] else {
                unreachable!("the module's first item is a block")
            };
            b.insts[0].subop = Some(sub.into());
            from_json(&doc).unwrap_err().to_string()
        };
        let e = with_subop("mux");
        assert!(
            e.contains("unknown tensor_tensor subop `mux` (known: add sub mul and or xor shl shr min max div)"),
            "{e}"
        );
        let e = with_subop("exp");
        assert!(
            e.contains(
                "`exp` is not a sub-operation of `tensor_tensor` (its sub-operations: add sub"
            ),
            "{e}"
        );
    }

    #[test]
    fn deep_json_nesting_is_a_clean_error() {
        let mut s =
            String::from("{\"target\":{\"preset\":\"trn2\"},\"funcs\":[{\"name\":\"f\",\"body\":");
        for _ in 0..100_000 {
            s.push_str("[{\"loop\":{\"body\":");
        }
        let e = parse_json(s.as_bytes()).unwrap_err();
        assert!(matches!(e, JsonError::Syntax { line: 1, .. }), "{e}");
        assert!(e.to_string().contains("nested more than"), "{e}");
        // Bare brackets, and brackets inside strings (which do not count).
        let e = parse_json("[".repeat(100_000).as_bytes()).unwrap_err();
        let col = max_json_depth() + 1;
        assert!(e.to_string().starts_with(&format!("1:{col}: ")), "{e}");
        let quoted = format!("\"{}\"", "[".repeat(100_000));
        assert!(!parse_json(quoted.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("nested more than"));
        assert!(check_depth(br#"{"a": "\"[[[[", "b": [[]]}"#, 3).is_ok());
        assert!(check_depth(br#"{"a": "\"[[[[", "b": [[[]]]}"#, 3).is_err());
    }

    /// A module whose loops nest as deep as the text format allows, with
    /// the deepest block and access pattern inside.
    fn deepest_module() -> String {
        let depth = Limits::default().loop_depth as usize;
        let mut s = String::from("target trn2\n\nsb %t [128 x 64]\n\nfunc @main {\n");
        for k in 0..depth {
            s.push_str(&format!("{}loop {} {{\n", "  ".repeat(k + 1), k + 2));
        }
        let pad = "  ".repeat(depth + 1);
        s.push_str(&format!(
            "{pad}inner:\n{pad}  %t[p0:64, 0:32] = tensor_copy %t[p0:64, e2, [2,4] [1,8]]\n"
        ));
        for k in (0..depth).rev() {
            s.push_str(&format!("{}}}\n", "  ".repeat(k + 1)));
        }
        s.push_str("}\n");
        s
    }

    /// The nesting depth of a JSON text (no brackets in its strings).
    fn depth_of(json: &str) -> usize {
        let (mut d, mut max) = (0usize, 0usize);
        for b in json.bytes() {
            match b {
                b'[' | b'{' => {
                    d += 1;
                    max = max.max(d);
                }
                b']' | b'}' => d -= 1,
                _ => {}
            }
        }
        max
    }

    #[test]
    fn the_deepest_legal_module_goes_through_json_and_back() {
        let m = text::parse_str(&deepest_module()).unwrap();
        let src = text::print(&m);
        assert_eq!(
            m.loops().depth.values().copied().max(),
            Some(Limits::default().loop_depth)
        );
        let js = to_json_string(&m);
        // The bound is exactly what the deepest legal document reaches.
        assert_eq!(depth_of(&js), max_json_depth());
        let back = parse_json(js.as_bytes()).unwrap();
        assert_eq!(text::print(&back), src);
        assert_eq!(to_json(&back), to_json(&m));
        // One loop deeper: refused by the depth scan (the innermost block
        // has an instruction) or, without it, by the model with its path.
        let mut doc = to_json(&m);
        let body = std::mem::take(&mut doc.funcs[0].body);
        doc.funcs[0].body = vec![JsonItem::Loop(JsonLoop {
            name: None,
            trip: None,
            body,
        })];
        let js = serde_json::to_string(&doc).unwrap();
        let e = parse_json(js.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("nested more than"), "{e}");
        let mut items = &mut doc.funcs[0].body;
        loop {
            match &mut items[0] {
                JsonItem::Loop(l) => items = &mut l.body,
                JsonItem::Block(b) => {
                    b.insts.clear();
                    break;
                }
            }
        }
        let js = serde_json::to_string(&doc).unwrap();
        let e = parse_json(js.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("nested too deeply"), "{e}");
    }
}
