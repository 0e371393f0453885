//! Prints what the adaptive controller reaches in every scenario of `tests/scenarios/`
//! (fake time, no network): `cargo run --release --example aimd_sim [-- NAME-FILTER]`
//! (`--trace`: one line per simulated second on stderr; `--trace-host NAME`: on a broad
//! scenario, every answer of host `NAME` (`h0`, `h1`, …) with its lanes after it, on
//! stderr; `--dir DIR`: the scenarios of another folder, e.g. while writing new ones).
//! The scenario tests (`tests/aimd_scenarios.rs`) assert the same runs against the
//! expected ranges written in each file; `--markdown` prints docs/limiter.md's table (one row
//! per scenario: the worst of its seeds).

use std::path::{Path, PathBuf};

use exitcrawl::sim::scenario::BroadScenario;
use exitcrawl::sim::{simulate, simulate_broad, BroadReport, Scenario, SimReport};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let markdown = args.iter().any(|a| a == "--markdown");
    let trace = args.iter().any(|a| a == "--trace");
    let value_of = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let dir = value_of("--dir").map(PathBuf::from);
    let trace_host = value_of("--trace-host").cloned();
    let filter = args
        .iter()
        .enumerate()
        .find(|(i, a)| {
            !a.starts_with("--")
                && (*i == 0 || !["--dir", "--trace-host"].contains(&args[i - 1].as_str()))
        })
        .map(|(_, a)| a.clone());
    let broad_dir = dir
        .clone()
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios"))
        .join("broad");
    let files = scenario_files(dir);
    print_header(markdown);
    let mut all_met = true;
    for path in files {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("?")
            .to_owned();
        if filter.as_ref().is_some_and(|f| !stem.contains(f.as_str())) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable scenario");
        let scenario = match Scenario::parse(&text) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                continue;
            }
        };
        let runs = run_seeds(&path, &stem, &scenario, trace, markdown);
        let over_seeds = scenario.misses_over_seeds(runs.iter().map(|r| &r.0));
        if !markdown {
            for miss in &over_seeds {
                println!("{stem:<28} all seeds: {miss}");
            }
        }
        let met = over_seeds.is_empty() && runs.iter().all(|r| r.1.is_empty());
        all_met &= met;
        if markdown && !runs.is_empty() {
            print_markdown_row(&stem, &scenario, &runs, met);
        }
    }
    if broad_dir.is_dir() {
        all_met &= run_broad(&broad_dir, filter.as_deref(), markdown, trace_host);
    }
    if !all_met {
        std::process::exit(1);
    }
}

/// The broad-crawl scenarios of `dir` (a row per class and seed, or docs/limiter.md's
/// table: a row per scenario, the worst of its seeds); whether all met their ranges.
fn run_broad(dir: &Path, filter: Option<&str>, markdown: bool, trace_host: Option<String>) -> bool {
    println!();
    if markdown {
        println!("| broad scenario | what it models | ideal/elapsed | 429s | 429s per host p90 / max | expected ideal/elapsed | expected 429s | met |");
        println!("|---|---|---|---|---|---|---|---|");
    } else {
        println!(
            "{:<34} {:>4} {:<6} {:>5} {:>6} {:>8} {:>8} {:>7} {:>8} {:>7} ok",
            "broad scenario",
            "seed",
            "class",
            "hosts",
            "pages",
            "ideal s",
            "elapsed",
            "share",
            "429s",
            "p90/max"
        );
    }
    let mut all_met = true;
    for path in scenario_files(Some(dir.to_path_buf())) {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("?")
            .to_owned();
        if filter.is_some_and(|f| !stem.contains(f)) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable scenario");
        let sc = match BroadScenario::parse(&text) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                all_met = false;
                continue;
            }
        };
        let mut runs: Vec<(BroadReport, Vec<String>)> = vec![];
        for &seed in &sc.run.seeds {
            let cfg = match sc.sim_config(seed) {
                Ok(c) => exitcrawl::sim::BroadConfig {
                    trace_host: trace_host.clone(),
                    ..c
                },
                Err(e) => {
                    eprintln!("{}: {e}", path.display());
                    break;
                }
            };
            let r = simulate_broad(&cfg);
            let misses = sc.misses(&r);
            if !markdown {
                for c in r.classes.iter().chain([&r.all]) {
                    let last = std::ptr::eq(c, &r.all);
                    println!(
                        "{:<34} {:>4} {:<6} {:>5} {:>6} {:>8.1} {:>8.1} {:>7.3} {:>7.2}% {:>7} {}",
                        stem,
                        seed,
                        c.name,
                        c.hosts,
                        c.pages,
                        c.ideal.as_secs_f64(),
                        c.elapsed.as_secs_f64(),
                        c.ideal_share(),
                        100.0 * c.throttled_fraction(),
                        format!("{}/{}", c.throttled_p90, c.throttled_max),
                        match (last, misses.is_empty()) {
                            (false, _) => String::new(),
                            (true, true) => "yes".into(),
                            (true, false) => misses.join("; "),
                        }
                    );
                }
            }
            runs.push((r, misses));
        }
        let met = !runs.is_empty() && runs.iter().all(|r| r.1.is_empty());
        all_met &= met;
        if markdown && !runs.is_empty() {
            print_broad_row(&stem, &sc, &runs, met);
        }
    }
    all_met
}

/// docs/limiter.md's row for one broad scenario: the range over its seeds.
fn print_broad_row(stem: &str, sc: &BroadScenario, runs: &[(BroadReport, Vec<String>)], met: bool) {
    let range = |f: &dyn Fn(&BroadReport) -> f64| {
        let v = runs.iter().map(|r| f(&r.0));
        let lo = v.clone().fold(f64::MAX, f64::min);
        (lo, v.fold(f64::MIN, f64::max))
    };
    let (s_lo, s_hi) = range(&|r| r.all.ideal_share());
    let (t_lo, t_hi) = range(&|r| 100.0 * r.all.throttled_fraction());
    let p90 = runs
        .iter()
        .map(|r| r.0.all.throttled_p90)
        .max()
        .unwrap_or(0);
    let max = runs
        .iter()
        .map(|r| r.0.all.throttled_max)
        .max()
        .unwrap_or(0);
    let e = &sc.expect;
    println!(
        "| `{stem}` | {} | {s_lo:.3}–{s_hi:.3} | {t_lo:.2}–{t_hi:.2} % | {p90} / {max} | {:.2}–{:.2} | {:.1}–{:.1} %{} | {} |",
        sc.name,
        e.ideal_share[0],
        e.ideal_share[1],
        100.0 * e.throttled[0],
        100.0 * e.throttled[1],
        e.max_p90_per_host.map_or_else(String::new, |m| format!(", p90 ≤ {m}")),
        if met { "yes" } else { "**no**" }
    );
}

/// The scenario files of `dir` (default `tests/scenarios/`), sorted.
fn scenario_files(dir: Option<PathBuf>) -> Vec<PathBuf> {
    let dir = dir.unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/scenarios exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

/// The table's header: docs/limiter.md's markdown table, or one column per figure of a run.
fn print_header(markdown: bool) {
    if markdown {
        println!("| scenario | what it models | goodput | throttled | expected goodput | expected throttled | also | met |");
        println!("|---|---|---|---|---|---|---|---|");
    } else {
        println!(
            "{:<28} {:>4} {:>8} {:>9} {:>8} {:>8} {:>8} {:>7} {:>5} {:>7} {:<7} ok",
            "scenario",
            "seed",
            "goodput",
            "throttled",
            "warm-thr",
            "final/s",
            "lat ms",
            "errors",
            "bans",
            "p99/kn",
            "scope"
        );
    }
}

/// Simulate every seed of `scenario` (a row each unless `markdown`): each run's report
/// and the expectations it missed. A seed whose configuration is invalid ends the list.
fn run_seeds(
    path: &Path,
    stem: &str,
    scenario: &Scenario,
    trace: bool,
    markdown: bool,
) -> Vec<(SimReport, Vec<String>)> {
    let mut runs: Vec<(SimReport, Vec<String>)> = vec![];
    for &seed in &scenario.run.seeds {
        let cfg = match scenario.sim_config(seed) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                break;
            }
        };
        let r = simulate(&exitcrawl::sim::SimConfig { trace, ..cfg });
        let misses = scenario.misses(&r);
        if !markdown {
            print_run_row(stem, seed, &r, &misses);
        }
        runs.push((r, misses));
    }
    runs
}

/// One seed's figures, and the expectations it missed (`yes`: none).
fn print_run_row(stem: &str, seed: u64, r: &SimReport, misses: &[String]) {
    println!(
        "{:<28} {:>4} {:>8.3} {:>8.3}% {:>8} {:>8.1} {:>8.1} {:>7} {:>5} {:>7} {:<7} {}",
        stem,
        seed,
        r.goodput,
        100.0 * r.throttled_fraction,
        r.warmup_throttled,
        r.final_rps,
        r.mean_latency.as_secs_f64() * 1000.0,
        r.errors,
        r.bans_after_warmup,
        r.in_flight_p99_over_knee
            .map_or_else(|| "-".into(), |x| format!("{x:.2}")),
        r.detected.as_str(),
        if misses.is_empty() {
            "yes".into()
        } else {
            misses.join("; ")
        }
    );
}

/// docs/limiter.md's row for one scenario: the worst of its seeds against the expected ranges.
fn print_markdown_row(
    stem: &str,
    scenario: &Scenario,
    runs: &[(SimReport, Vec<String>)],
    met: bool,
) {
    let g_lo = runs.iter().map(|r| r.0.goodput).fold(f64::MAX, f64::min);
    let g_hi = runs.iter().map(|r| r.0.goodput).fold(f64::MIN, f64::max);
    let t_hi = runs
        .iter()
        .map(|r| r.0.throttled_fraction)
        .fold(0.0, f64::max);
    let e = &scenario.expect;
    let mut also = vec![];
    if e.max_bans_after_warmup.is_some() {
        let bans: usize = runs
            .iter()
            .map(|r| r.0.bans_after_warmup)
            .max()
            .unwrap_or(0);
        also.push(format!("{bans} bans after warm-up"));
    }
    if let Some(k) = runs
        .iter()
        .filter_map(|r| r.0.in_flight_p99_over_knee)
        .reduce(f64::max)
    {
        also.push(format!("in-flight p99 ≤ {k:.2} × knee"));
    }
    if let Some(f) = runs
        .iter()
        .filter_map(|r| r.0.sent_fraction)
        .reduce(f64::min)
    {
        also.push(format!("sent ≥ {f:.3} of demand"));
    }
    if let Some(d) = &e.detected {
        let hits = runs.iter().filter(|r| r.0.detected.as_str() == d).count();
        if hits == runs.len() {
            also.push(format!("scope {d}"));
        } else {
            also.push(format!("scope {d} in {hits} of {} seeds", runs.len()));
        }
    }
    println!(
        "| `{stem}` | {} | {g_lo:.3}–{g_hi:.3} | ≤ {:.2} % | {:.2}–{:.2} | {:.1}–{:.1} % | {} | {} |",
        scenario.name,
        100.0 * t_hi,
        e.goodput[0],
        e.goodput[1],
        100.0 * e.throttled[0],
        100.0 * e.throttled[1],
        also.join(", "),
        if met { "yes" } else { "**no**" }
    );
}
