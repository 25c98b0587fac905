//! Hostile input: every limit ends in a clean error that names the limit,
//! and input-controlled nesting never reaches a recursion (these tests run
//! on the test harness's 2 MiB thread stacks, so a recursive parser would
//! overflow on them).

use tusk_core::ir::{Capacity, Limits, Module, Space};
use tusk_core::Target;
use tusk_shim::{dimacs, io, json, text};

const HEADER: &str = "target trn2\ndram %x [128 x 4096] input\ndram %y [128 x 4096] output\nsb %t [128 x 4096]\nfunc @f {\n";

/// A function whose body nests `depth` loops around one copy.
fn nested(depth: usize) -> String {
    let mut s = String::from(HEADER);
    for _ in 0..depth {
        s.push_str("loop 2 {\n");
    }
    s.push_str("b:\n  %t = load %x\n  %y = save %t queue 1\n");
    for _ in 0..depth {
        s.push_str("}\n");
    }
    s.push_str("}\n");
    s
}

#[test]
fn loop_nesting_at_the_limit_parses_and_beyond_is_refused() {
    let limit = Limits::default().loop_depth as usize;
    let m = text::parse_str(&nested(limit)).expect("nesting at the limit parses");
    assert_eq!(m.num_loops(), limit);
    let e = text::parse_str(&nested(limit + 1)).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(&limit.to_string()), "{msg}");
    assert_eq!(e.line as usize, 6 + limit, "{msg}");
}

#[test]
fn deep_nesting_never_recurses() {
    // 200 000 open loops: the parser stops at the depth limit, the printer
    // and JSON never see it.
    let e = text::parse_str(&nested(200_000)).unwrap_err();
    assert!(e.to_string().contains("loop"), "{e}");
    // JSON: serde's recursion limit (128) before the module's depth limit.
    let mut j = String::from(r#"{"target":{"preset":"trn2"},"funcs":[{"name":"f","body":"#);
    j.push_str(&"[".repeat(100_000));
    assert!(json::parse_json(j.as_bytes()).is_err());
}

#[test]
fn names_longer_than_the_limit_are_refused() {
    let long = "n".repeat(tusk_core::ir::names::MAX_NAME_LEN + 1);
    let src = format!("target trn2\nsb %{long} [128 x 4096]\n");
    let e = text::parse_str(&src).unwrap_err();
    assert_eq!((e.line, e.col), (2, 4));
    assert!(e.to_string().contains("256"), "{e}");
}

#[test]
fn entity_count_limits_are_clean_errors() {
    // The module's limits, lowered so the test is quick; the parser and the
    // builder go through the same checks with the default limits.
    let mut m = Module::with_capacity(Target::default(), Capacity::default());
    m.limits = Limits {
        locations: 3,
        registers: 2,
        instructions: 4,
        ..Limits::default()
    };
    for k in 0..3 {
        m.add_mem(&format!("t{k}"), Space::Sb, 128, 64)
            .expect("below the limit");
    }
    let e = m.add_mem("t3", Space::Sb, 128, 64).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("memory locations") && msg.contains('3'),
        "{msg}"
    );
}

#[test]
fn oversized_files_are_refused_before_reading_them_whole() {
    let dir = std::env::temp_dir().join(format!("tusk-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("big.tusk");
    std::fs::write(&f, vec![b' '; 4096]).unwrap();
    match io::read_limited(&f, 1024) {
        Err(io::IoError::TooLarge { limit, .. }) => assert_eq!(limit, 1024),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(io::read_limited(&f, 4096).unwrap().len(), 4096);
    let _ = std::fs::remove_dir_all(&dir);
    // The parser's own check, for callers that hand it bytes directly, is
    // `text::MAX_TEXT_BYTES` (1 GiB): not allocated here.
    const { assert!(text::MAX_TEXT_BYTES <= u32::MAX as u64) };
}

#[test]
fn dimacs_limits_are_clean_errors() {
    let src = format!("p edge {} 1\n", dimacs::MAX_VERTICES + 1);
    let e = dimacs::parse(src.as_bytes()).unwrap_err();
    assert_eq!((e.line, e.column), (1, 8));
    assert!(e.message.contains("limit"), "{e}");
    let src = format!("p edge 2 {}\n", dimacs::MAX_EDGES + 1);
    assert!(dimacs::parse(src.as_bytes()).is_err());
    assert!(dimacs::parse(b"p edge 2 1\ne 1 3\n").is_err());
}

#[test]
fn dsa_writes_atomically_and_never_over_its_input() {
    use tusk_shim::dsa::{run, Algo, DsaArgs};
    let dir = std::env::temp_dir().join(format!("tusk-hostile-dsa-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("t.100.csv");
    let text = "id,lower,upper,size\na,0,4,40\nb,2,6,50\n";
    std::fs::write(&input, text).unwrap();
    let mut args = DsaArgs {
        file: input.clone(),
        capacity: None,
        algo: Algo::BestFit,
        out: Some(dir.join("out.csv")),
        svg: None,
        budget_ms: None,
        budget_nodes: None,
        minimize: false,
        repack_ms: 0,
        max_memory: None,
        json: false,
        explain: false,
    };
    assert_eq!(run(&args), 0);
    let out = std::fs::read_to_string(dir.join("out.csv")).unwrap();
    assert!(out.starts_with("id,lower,upper,size,offset\n"), "{out}");
    // No temporary file is left next to the output.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    args.out = Some(input.clone());
    assert_eq!(run(&args), 2);
    assert_eq!(std::fs::read_to_string(&input).unwrap(), text);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn batch_directory_walk_is_sorted_and_ignores_link_loops() {
    let dir = std::env::temp_dir().join(format!("tusk-hostile-walk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a/c")).unwrap();
    for f in [
        "a/b.tusk",
        "a/c/x.json",
        "a/d.tusk",
        "a/notes.txt",
        "z.tusk",
    ] {
        std::fs::write(dir.join(f), "").unwrap();
    }
    // A link back to the root: followed, it would never end.
    #[cfg(unix)]
    std::os::unix::fs::symlink(&dir, dir.join("a/c/loop")).unwrap();
    let found = tusk_shim::batch::expand(std::slice::from_ref(&dir)).unwrap();
    let rel: Vec<String> = found
        .iter()
        .map(|(_, r)| r.to_string_lossy().into_owned())
        .collect();
    assert_eq!(rel, ["a/b.tusk", "a/c/x.json", "a/d.tusk", "z.tusk"]);
    let _ = std::fs::remove_dir_all(&dir);
}
