//! No input, however mangled, makes the config loader panic, and every error it gives
//! explains itself: names a key, or says where the syntax broke.

mod config_support;

use config_support::{default_toml, repo_file, schema_keys, ONE_EXIT};
use exitcrawl::config::{ConfigError, Settings};
use proptest::prelude::*;

// ---------------------------------------------------------------- robustness

/// Fragments a mutation may splice in: TOML punctuation, odd numbers, key names, values
/// of the wrong type.
const FRAGMENTS: &[&str] = &[
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "=",
    "\"",
    "'",
    "#",
    ".",
    ",",
    "\n",
    " ",
    "\\",
    "-",
    "_",
    "0",
    "-1",
    "1e309",
    "nan",
    "inf",
    "-inf",
    "0.0",
    "1.5",
    "99999999999999999999",
    "4294967296",
    "65536",
    "true",
    "false",
    "\"\"",
    "\"x\"",
    "[]",
    "{}",
    "[1, \"a\"]",
    "\"300.1.1.1\"",
    "\"127.0.0.2\"",
    "\"0.0.0.0\"",
    "\"::1\"",
    "\"gcra\"",
    "\"sliding_log\"",
    "\"per_exit\"",
    "\"global\"",
    "exits",
    "crawler",
    "limiter",
    "health",
    "metrics",
    "[[exits]]",
    "[crawler]",
    "rate",
    "burst",
    "name",
    "source_ip",
    "x[999999999999]",
    "\"a[999999999999]\"",
    "1979-05-27T07:32:00Z",
    "é",
    "\u{0}",
    "\u{202e}",
];

#[derive(Debug, Clone)]
enum Mutation {
    DeleteLine(usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    Uncomment(usize),
    ReplaceValue(usize, usize),
    InsertFragment(usize, usize),
    DeleteChar(usize),
    ReplaceChar(usize, char),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let n = FRAGMENTS.len();
    prop_oneof![
        any::<usize>().prop_map(Mutation::DeleteLine),
        any::<usize>().prop_map(Mutation::DuplicateLine),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        any::<usize>().prop_map(Mutation::Uncomment),
        (any::<usize>(), 0..n).prop_map(|(l, f)| Mutation::ReplaceValue(l, f)),
        (any::<usize>(), 0..n).prop_map(|(p, f)| Mutation::InsertFragment(p, f)),
        any::<usize>().prop_map(Mutation::DeleteChar),
        (any::<usize>(), any::<char>()).prop_map(|(p, c)| Mutation::ReplaceChar(p, c)),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let chars: Vec<char> = text.chars().collect();
    let nl = lines.len().max(1);
    let nc = chars.len().max(1);
    match *m {
        Mutation::DeleteLine(i) if !lines.is_empty() => {
            lines.remove(i % nl);
        }
        Mutation::DuplicateLine(i) if !lines.is_empty() => {
            let l = lines[i % nl].clone();
            lines.insert(i % nl, l);
        }
        Mutation::SwapLines(a, b) if !lines.is_empty() => lines.swap(a % nl, b % nl),
        Mutation::Uncomment(i) if !lines.is_empty() => {
            let l = &mut lines[i % nl];
            *l = l.trim_start_matches(['#', ' ']).to_string();
        }
        Mutation::ReplaceValue(i, f) if !lines.is_empty() => {
            let l = &mut lines[i % nl];
            if let Some((k, _)) = l.split_once('=') {
                *l = format!("{k}= {}", FRAGMENTS[f]);
            }
        }
        Mutation::InsertFragment(p, f) => {
            let mut c = chars.clone();
            let at = p % (c.len() + 1);
            c.splice(at..at, FRAGMENTS[f].chars());
            return c.into_iter().collect();
        }
        Mutation::DeleteChar(p) if !chars.is_empty() => {
            let mut c = chars.clone();
            c.remove(p % nc);
            return c.into_iter().collect();
        }
        Mutation::ReplaceChar(p, ch) if !chars.is_empty() => {
            let mut c = chars.clone();
            c[p % nc] = ch;
            return c.into_iter().collect();
        }
        _ => {}
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// An error must say what is wrong: about a key (named first), the TOML syntax, or an
/// environment variable — never a bare message without context.
fn assert_explains(e: &ConfigError, input: &str) {
    let text = e.to_string();
    match e {
        ConfigError::Invalid { key, message, .. } => {
            assert!(!key.is_empty(), "empty key: {text:?} for\n{input}");
            assert!(!message.trim().is_empty(), "empty message: {text:?}");
            assert!(text.starts_with(&format!("{key}: ")), "{text:?}");
        }
        ConfigError::Syntax { message, .. } => {
            assert!(text.contains("not valid TOML"), "{text:?}");
            assert!(!message.trim().is_empty(), "{text:?}");
        }
        ConfigError::Env { name, .. } => assert!(text.contains(name.as_str()), "{text:?}"),
        other => panic!("unexplained error {other:?} for input:\n{input}"),
    }
}

proptest! {
    // No failure persistence: a regression file would be written next to this test.
    #![proptest_config(ProptestConfig {
        cases: 768,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_config_files_never_panic_and_errors_explain_themselves(
        example in any::<bool>(),
        muts in proptest::collection::vec(mutation(), 1..6),
    ) {
        let base = if example {
            std::fs::read_to_string(repo_file("config/example.toml")).unwrap()
        } else {
            default_toml()
        };
        let text = muts.iter().fold(base, |t, m| apply(&t, m));
        match Settings::from_toml_str(&text) {
            Ok(s) => prop_assert!(s.validate().is_ok()),
            Err(e) => assert_explains(&e, &text),
        }
    }

    #[test]
    fn random_env_overrides_never_panic_and_name_their_key(
        key in proptest::sample::select(schema_keys().into_iter()
            .filter(|k| !k.starts_with("exits."))
            .collect::<Vec<_>>()),
        value in prop_oneof![
            proptest::sample::select(FRAGMENTS.to_vec()).prop_map(str::to_string),
            any::<String>(),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|x| x.to_string()),
        ],
    ) {
        let name = format!("EXITCRAWL__{}", key.replace('.', "__").to_uppercase());
        match Settings::from_toml_str_with_env(ONE_EXIT, vec![(name.clone(), value.clone())]) {
            Ok(s) => prop_assert!(s.validate().is_ok()),
            Err(e) => {
                assert_explains(&e, &format!("{name}={value:?}"));
                // About the key itself, or a relation that names it (min_rps ≤ max_rps).
                let k = e.key().unwrap_or_default();
                let text = e.to_string();
                prop_assert!(k.starts_with(&key) || text.contains(&key), "{} is not about {}", text, key);
            }
        }
    }
}
