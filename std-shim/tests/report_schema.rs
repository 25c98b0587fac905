//! The JSON report against its schema (`docs/report.schema.json`): real
//! reports of every example at several optlevels, with and without
//! `--explain`, and of failed runs, each validated; and every property the
//! schema names appears in at least one of them, so the schema (and
//! docs/REPORT.md, written from it) neither misses a field nor keeps a dead
//! one.
//!
//! The validator implements the part of JSON Schema the file uses: `type`
//! (one name or a list), `enum`, `properties`, `required`,
//! `additionalProperties: false`, `items`, `oneOf` and `$ref` to `$defs`.

mod common;

use std::collections::BTreeSet;
use std::fs;

use common::{run_in, scratch, workspace};
use serde_json::Value;

/// Checks `v` against `schema`; returns the first violation with its path.
fn check(
    root: &Value,
    schema: &Value,
    v: &Value,
    path: &str,
    seen: &mut BTreeSet<String>,
) -> Result<(), String> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r
            .strip_prefix("#/$defs/")
            .ok_or_else(|| format!("unsupported $ref {r}"))?;
        return check(root, &root["$defs"][name], v, path, seen);
    }
    if let Some(alts) = schema.get("oneOf").and_then(Value::as_array) {
        let mut errs = Vec::new();
        let mut ok = 0;
        for a in alts {
            let mut s = seen.clone();
            match check(root, a, v, path, &mut s) {
                Ok(()) => {
                    ok += 1;
                    *seen = s;
                }
                Err(e) => errs.push(e),
            }
        }
        return match ok {
            1 => Ok(()),
            0 => Err(format!(
                "{path}: matches no alternative: {}",
                errs.join("; ")
            )),
            _ => Err(format!("{path}: matches {ok} alternatives of a oneOf")),
        };
    }
    if let Some(t) = schema.get("type") {
        let names: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => return Err(format!("{path}: bad type in the schema")),
        };
        let is = |n: &str| match n {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            "integer" => v.is_u64() || v.is_i64(),
            "number" => v.is_number(),
            _ => false,
        };
        if !names.iter().any(|n| is(n)) {
            return Err(format!("{path}: {v} is not {names:?}"));
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            return Err(format!("{path}: {v} is not one of {e:?}"));
        }
    }
    if let Some(obj) = v.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        for r in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap_or_default();
            if !obj.contains_key(r) {
                return Err(format!("{path}: required `{r}` missing"));
            }
        }
        for (k, x) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(s) => {
                    seen.insert(format!("{path}.{k}"));
                    check(root, s, x, &format!("{path}.{k}"), seen)?;
                }
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("{path}: `{k}` is not in the schema"));
                }
                None => {}
            }
        }
    }
    if let (Some(a), Some(items)) = (v.as_array(), schema.get("items")) {
        for (i, x) in a.iter().enumerate() {
            let _ = i;
            check(root, items, x, &format!("{path}[]"), seen)?;
        }
    }
    Ok(())
}

/// Every property path the schema names, `$defs` expanded at their uses
/// (paths as `check` records them).
fn paths(root: &Value, schema: &Value, path: &str, out: &mut BTreeSet<String>) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        if let Some(name) = r.strip_prefix("#/$defs/") {
            paths(root, &root["$defs"][name], path, out);
        }
        return;
    }
    for a in schema
        .get("oneOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        paths(root, a, path, out);
    }
    for (k, s) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let p = format!("{path}.{k}");
        out.insert(p.clone());
        paths(root, s, &p, out);
    }
    if let Some(items) = schema.get("items") {
        paths(root, items, &format!("{path}[]"), out);
    }
}

#[test]
fn real_reports_match_the_schema_and_use_all_of_it() {
    let root = workspace();
    let schema: Value =
        serde_json::from_str(&fs::read_to_string(root.join("docs/report.schema.json")).unwrap())
            .unwrap();
    let work = scratch("schema", "reports");
    let ex = |p: &str| root.join("examples").join(p).to_str().unwrap().to_string();
    let mut runs: Vec<Vec<String>> = Vec::new();
    for f in [
        "rmsnorm_qkv.tusk",
        "conv1d.tusk",
        "mamba_v3.tusk",
        "flash_attn_bwd.tusk",
    ] {
        for o in ["0", "2", "6", "8"] {
            runs.push(vec![ex(f), "--optlevel".into(), o.into()]);
        }
        runs.push(vec![ex(f), "--explain".into()]);
    }
    runs.push(vec![
        ex("placed/conv1d.tusk"),
        "--optlevel".into(),
        "7".into(),
    ]);
    runs.push(vec![
        ex("rmsnorm_qkv.tusk"),
        "--allocator".into(),
        "exact".into(),
    ]);
    // A budget the exact search does not fit: the report lists what it skipped.
    runs.push(vec![
        ex("flash_attn_bwd.tusk"),
        "--max-memory".into(),
        "4M".into(),
        "--no-verify".into(),
    ]);
    runs.push(vec![
        ex("broken/matmul_fully_optimized-out-of-bounds.tusk"),
        "--explain".into(),
    ]);
    runs.push(vec![ex("conv1d.tusk"), "--optlevel".into(), "7".into()]);
    runs.push(vec![
        ex("rmsnorm_qkv.tusk"),
        "--rotation".into(),
        "psum".into(),
    ]);
    // SB rotation with a loss the headroom cannot remove: the probe.
    runs.push(vec![ex("mamba_v3.tusk"), "--rotation".into(), "all".into()]);
    runs.push(vec![
        ex("block_matmul.tusk"),
        "--dma-affinity".into(),
        "on".into(),
    ]);
    // A run that spills: the tight generated module at optlevel 8.
    let g = run_in(
        &work,
        &[
            "gen",
            "-n",
            "400",
            "-s",
            "2",
            "--preset",
            "tight",
            "-o",
            "tight.tusk",
        ],
    );
    assert_eq!(g.code, 0, "{}", g.stderr);
    runs.push(vec!["tight.tusk".into(), "--optlevel".into(), "8".into()]);
    runs.push(vec!["tight.tusk".into(), "--optlevel".into(), "2".into()]);
    // SB under pressure at optlevel 2: the linear scan beside the colorer.
    runs.push(vec![
        ex("block_matmul.tusk"),
        "--set".into(),
        "sb-bytes=19353".into(),
    ]);
    let mut seen = BTreeSet::new();
    let mut statuses = BTreeSet::new();
    for r in &runs {
        let mut args = vec!["run", "--json"];
        args.extend(r.iter().map(String::as_str));
        let o = run_in(&work, &args);
        let v: Value = serde_json::from_str(&o.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}{}", o.stdout, o.stderr));
        check(&schema, &schema, &v, "", &mut seen)
            .unwrap_or_else(|e| panic!("{args:?}: {e}\n{v:#}"));
        statuses.insert(v["status"].as_str().unwrap_or_default().to_string());
    }
    assert!(
        statuses.contains("ok") && statuses.contains("failed"),
        "{statuses:?}"
    );
    let mut all = BTreeSet::new();
    paths(&schema, &schema, "", &mut all);
    // Veto counts appear only when a predicate vetoed something: those the
    // runs above never trigger are exempt by name, not by count.
    let unseen: Vec<&String> = all
        .iter()
        .filter(|p| !seen.contains(*p))
        .filter(|p| !p.starts_with(".dma[].vetoes."))
        .collect();
    assert!(
        unseen.is_empty(),
        "schema properties no report used: {unseen:?}"
    );
    let _ = fs::remove_dir_all(&work);
}

#[test]
fn the_validator_rejects_what_the_schema_forbids() {
    let schema: Value = serde_json::json!({
        "type": "object", "additionalProperties": false, "required": ["a"],
        "properties": {"a": {"type": "integer"}, "b": {"enum": ["x"]}}
    });
    let mut seen = BTreeSet::new();
    assert!(check(
        &schema,
        &schema,
        &serde_json::json!({"a": 1, "b": "x"}),
        "",
        &mut seen
    )
    .is_ok());
    assert!(check(
        &schema,
        &schema,
        &serde_json::json!({"b": "x"}),
        "",
        &mut seen
    )
    .is_err());
    assert!(check(
        &schema,
        &schema,
        &serde_json::json!({"a": 1.5}),
        "",
        &mut seen
    )
    .is_err());
    assert!(check(
        &schema,
        &schema,
        &serde_json::json!({"a": 1, "c": 0}),
        "",
        &mut seen
    )
    .is_err());
    assert!(check(
        &schema,
        &schema,
        &serde_json::json!({"a": 1, "b": "y"}),
        "",
        &mut seen
    )
    .is_err());
}
