//! Prints what the adaptive controller reaches in every scenario of `tests/scenarios/`
//! (fake time, no network): `cargo run --release --example aimd_sim`.
//! The scenario tests (`tests/aimd_scenarios.rs`) assert the same runs against the
//! expected ranges written in each file.

use std::path::Path;

use exitcrawl::sim::{simulate, Scenario};

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/scenarios exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    println!(
        "{:<24} {:>5} {:>8} {:>10} {:>9} {:>8} {:>8} {:>6}",
        "scenario", "seed", "goodput", "throttled", "warm-thr", "final/s", "lat ms", "cuts"
    );
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable scenario");
        let scenario = match Scenario::parse(&text) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                continue;
            }
        };
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
        for &seed in &scenario.run.seeds {
            let cfg = match scenario.sim_config(seed) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{}: {e}", path.display());
                    break;
                }
            };
            let r = simulate(&cfg);
            println!(
                "{:<24} {:>5} {:>8.3} {:>9.3}% {:>9} {:>8.1} {:>8.1} {:>6}",
                stem,
                seed,
                r.goodput,
                100.0 * r.throttled_fraction,
                r.warmup_throttled,
                r.final_rps,
                r.mean_latency.as_secs_f64() * 1000.0,
                r.decreases
            );
        }
    }
}
