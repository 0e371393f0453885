//! The adaptive controller against modelled sites, on fake time: every scenario in
//! `tests/scenarios/*.toml` (one host) and `tests/scenarios/broad/*.toml` (a broad
//! crawl), for each of its seeds, must land in the file's expected ranges.

use std::path::{Path, PathBuf};

use exitcrawl::sim::scenario::BroadScenario;
use exitcrawl::sim::{simulate, simulate_broad, Scenario};

fn scenario_files() -> Vec<PathBuf> {
    files_in("tests/scenarios")
}

fn files_in(folder: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("tests/scenarios exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_scenario_meets_its_expected_ranges() {
    let files = scenario_files();
    assert!(files.len() >= 30, "scenario files went missing: {files:?}");
    let mut failures = vec![];
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        let sc = Scenario::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!sc.run.seeds.is_empty(), "{}: no seeds", path.display());
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
        let mut reports = vec![];
        for &seed in &sc.run.seeds {
            let cfg = sc
                .sim_config(seed)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let r = simulate(&cfg);
            let misses = sc.misses(&r);
            if !misses.is_empty() {
                failures.push(format!("{stem} (seed {seed}): {}", misses.join("; ")));
            }
            reports.push(r);
        }
        for miss in sc.misses_over_seeds(&reports) {
            failures.push(format!("{stem}: {miss}"));
        }
    }
    assert!(
        failures.is_empty(),
        "out of range:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_broad_scenario_meets_its_expected_ranges() {
    let files = files_in("tests/scenarios/broad");
    assert!(
        files.len() >= 8,
        "broad scenario files went missing: {files:?}"
    );
    let mut failures = vec![];
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        let sc = BroadScenario::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!sc.run.seeds.is_empty(), "{}: no seeds", path.display());
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
        for &seed in &sc.run.seeds {
            let cfg = sc
                .sim_config(seed)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let misses = sc.misses(&simulate_broad(&cfg));
            if !misses.is_empty() {
                failures.push(format!("{stem} (seed {seed}): {}", misses.join("; ")));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "out of range:\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_bad_broad_scenario_file_is_reported() {
    let class = "[[class]]\nname = \"c\"\nhosts = 2\n[class.site]\n";
    let expect = "[expect]\nideal_share = [0.0, 1.0]\nthrottled = [0.0, 1.0]\n";
    let parse = |run: &str, site: &str| {
        BroadScenario::parse(&format!("name = \"n\"\n[run]\n{run}{class}{site}{expect}"))
    };
    let err = parse("pages = 4\nbogus = 1\n", "kind = \"none\"\n").unwrap_err();
    assert!(err.contains("bogus"), "{err}");
    let sc = parse("pages = 4\n", "kind = \"tide\"\n").unwrap();
    assert!(sc
        .sim_config(1)
        .unwrap_err()
        .contains("class \"c\": site.kind"));
    let sc = parse(
        "pages = 4\n",
        "kind = \"token_bucket\"\ncapacity = 1.0\nsteps = [[5.0, 0.5]]\n",
    )
    .unwrap();
    assert!(sc
        .sim_config(1)
        .unwrap_err()
        .contains("not modelled in a broad scenario"));
    let sc = parse("pages = 0\n", "kind = \"none\"\n").unwrap();
    assert!(sc.sim_config(1).unwrap_err().contains("run.pages"));
    // A class's ranges name a class the scenario has.
    let text = format!(
        "name = \"n\"\n[run]\npages = 4\n{class}kind = \"none\"\n{expect}\
         [[expect.class]]\nname = \"d\"\nideal_share = [0.0, 1.0]\n"
    );
    let err = BroadScenario::parse(&text)
        .unwrap()
        .sim_config(1)
        .unwrap_err();
    assert!(
        err.contains("expect.class.name") && err.contains("\"d\"") && err.contains("[\"c\"]"),
        "{err}"
    );
}

#[test]
fn a_broad_crawl_that_cannot_finish_misses_its_ranges() {
    // Ten pages a host at 1 req/s with a 5 s limit: the figures say what is left.
    let sc = BroadScenario::parse(
        "name = \"n\"\n[run]\npages = 10\nlimit_s = 5\n[[class]]\nname = \"c\"\nhosts = 3\n\
         [class.site]\nkind = \"token_bucket\"\ncapacity = 1.0\nburst = 1.0\n\
         [expect]\nideal_share = [0.0, 2.0]\nthrottled = [0.0, 1.0]\n\
         [[expect.class]]\nname = \"c\"\nideal_share = [0.0, 1.0]\nthrottled = [0.0, 1.0]\n",
    )
    .unwrap();
    let r = simulate_broad(&sc.sim_config(1).unwrap());
    assert!(
        r.all.unfinished > 0 && r.all.pages + r.all.unfinished == 30,
        "{r:?}"
    );
    let misses = sc.misses(&r);
    assert!(
        misses.iter().any(|m| m.contains("pages not fetched")),
        "{misses:?}"
    );
    // The class's own range is checked too; the whole crawl's wider one is met.
    assert!(
        misses
            .iter()
            .any(|m| m.starts_with("class \"c\": ideal share")),
        "{misses:?}"
    );
    assert!(
        !misses.iter().any(|m| m.starts_with("ideal share")),
        "{misses:?}"
    );
}

#[test]
fn tracing_a_host_leaves_the_crawl_as_it_was() {
    // `aimd_sim --trace-host` prints one host's answers; the run must be the same one.
    let sc = BroadScenario::parse(
        "name = \"n\"\n[run]\npages = 10\n[[class]]\nname = \"c\"\nhosts = 3\n\
         [class.site]\nkind = \"token_bucket\"\ncapacity = 2.0\nburst = 1.0\n\
         [expect]\nideal_share = [0.0, 2.0]\nthrottled = [0.0, 1.0]\n",
    )
    .unwrap();
    let cfg = sc.sim_config(1).unwrap();
    let plain = simulate_broad(&cfg);
    let traced = simulate_broad(&exitcrawl::sim::BroadConfig {
        trace_host: Some("h1".into()),
        ..cfg
    });
    assert!(plain.all.throttled > 0, "the hosts are learned: {plain:?}");
    assert_eq!(plain, traced);
}

#[test]
fn a_bad_scenario_file_is_reported() {
    let err = Scenario::parse("name = 1\n[site]\nkind = \"x\"\ncapacity = 1.0\n[expect]\ngoodput = [0.0, 1.0]\nthrottled = [0.0, 1.0]\nbogus = 1\n")
        .unwrap_err();
    assert!(err.contains("bogus"), "{err}");
    let sc = Scenario::parse("name = \"n\"\n[site]\nkind = \"tide\"\ncapacity = 1.0\n[expect]\ngoodput = [0.0, 1.0]\nthrottled = [0.0, 1.0]\n")
        .unwrap();
    assert!(sc.sim_config(1).unwrap_err().contains("site.kind"));
    let sc = Scenario::parse("name = \"n\"\n[site]\nkind = \"window\"\nlimit = 5\n[expect]\ngoodput = [0.0, 1.0]\nthrottled = [0.0, 1.0]\n")
        .unwrap();
    assert!(sc.sim_config(1).unwrap_err().contains("site.window_ms"));
    let sc = Scenario::parse("name = \"n\"\n[site]\nkind = \"none\"\nerror_rate = 1.5\n[expect]\ngoodput = [0.0, 1.0]\nthrottled = [0.0, 1.0]\n")
        .unwrap();
    assert!(sc
        .sim_config(1)
        .unwrap_err()
        .contains("site.error_rate: 1.5"));
    let sc = Scenario::parse("name = \"n\"\n[site]\nkind = \"token_bucket\"\ncapacity = 1.0\n[expect]\ngoodput = [0.0, 1.0]\nthrottled = [0.0, 1.0]\ndetected = \"host\"\ndetected_share = 1.5\n")
        .unwrap();
    assert!(sc
        .sim_config(1)
        .unwrap_err()
        .contains("expect.detected_share: 1.5"));
    let sc = Scenario::parse("name = \"n\"\n[site]\nkind = \"token_bucket\"\ncapacity = 1.0\n[expect]\ngoodput = [0.0, 1.0]\nthrottled = [0.0, 1.0]\ndetected_share = 0.9\n")
        .unwrap();
    assert!(sc
        .sim_config(1)
        .unwrap_err()
        .contains("without expect.detected"));
    let sc = Scenario::parse("name = \"n\"\n[site]\nkind = \"token_bucket\"\ncapacity = 1.0\nsteps = [[20.0, 0.5], [10.0, 1.0]]\n[expect]\ngoodput = [0.0, 1.0]\nthrottled = [0.0, 1.0]\n")
        .unwrap();
    assert!(sc
        .sim_config(1)
        .unwrap_err()
        .contains("site.steps: [10, 1]"));
}
