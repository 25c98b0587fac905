//! Where an input is at fault: the line and column of the entity a message
//! blames, written as parse errors write theirs (`FILE:LINE:COL: ...`) and
//! as `line` / `col` in JSON.
//!
//! Positions come from the [`SourceMap`] of a text input, one per run. A
//! message blames entities in the order it names them
//! ([`PipelineError::blamed`](tusk_core::PipelineError::blamed),
//! [`Finding::blamed`](tusk_core::verify::Finding::blamed)); the first the
//! text wrote is the one pointed at, so a spill copy a pass created (no
//! position) gives way to the next entity named. A JSON input, and a message
//! about created entities only, keeps the plain `FILE: ...`.

use serde_json::{json, Value};
use tusk_core::ir::Entity;

use crate::text::{Pos, SourceMap};

/// The position of the first of `blamed` that the text wrote.
pub fn position(map: Option<&SourceMap>, blamed: impl IntoIterator<Item = Entity>) -> Option<Pos> {
    map.and_then(|m| m.first_of(blamed))
}

/// `FILE:LINE:COL`, or `FILE` without a position: what goes before the
/// `: ` of a message.
pub fn at(file: &str, pos: Option<Pos>) -> String {
    match pos {
        Some(p) => format!("{file}:{p}"),
        None => file.to_string(),
    }
}

/// Adds `line` and `col` to a JSON object when there is a position.
pub fn add_to(v: &mut Value, pos: Option<Pos>) {
    if let (Some(p), Some(o)) = (pos, v.as_object_mut()) {
        o.insert("line".into(), json!(p.line));
        o.insert("col".into(), json!(p.col));
    }
}

/// `line` and `col` as JSON values, `null` without a position (for fields
/// a report always carries).
pub fn line_col(pos: Option<Pos>) -> (Value, Value) {
    match pos {
        Some(p) => (json!(p.line), json!(p.col)),
        None => (Value::Null, Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tusk_core::ir::Inst;

    #[test]
    fn the_first_written_entity_is_pointed_at() {
        let src = "target trn2\nsb %t [4 x 8] fp32\nfunc @main {\n  %t = memset 0\n}\n";
        let (m, map) = crate::text::parse_str_with_positions(src).expect("valid text");
        let t = m.mem_by_name("t").expect("declared");
        let made_later = Entity::Inst(Inst::new(m.num_insts()));
        let p = position(Some(&map), [made_later, Entity::Mem(t)]);
        assert_eq!(at("x.tusk", p), "x.tusk:2:4");
        assert_eq!(position(Some(&map), [made_later]), None);
        assert_eq!(position(None, [Entity::Mem(t)]), None);
        assert_eq!(at("x.tusk", None), "x.tusk");
        let mut v = json!({"file": "x.tusk"});
        add_to(&mut v, p);
        assert_eq!(v, json!({"file": "x.tusk", "line": 2, "col": 4}));
        let mut w = json!({"file": "x.tusk"});
        add_to(&mut w, None);
        assert_eq!(w, json!({"file": "x.tusk"}));
        assert_eq!(line_col(None), (Value::Null, Value::Null));
    }
}
