//! The `synth` command line writes the set the library builds, and refuses bad shapes.

use std::process::Command;

#[test]
fn scale_writes_the_set_and_refuses_bad_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("set");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_synth"))
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&[
        "scale",
        out.to_str().unwrap(),
        "--ranks",
        "4",
        "--sizes",
        "3",
    ]);
    assert!(o.status.success(), "{o:?}");
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let want: Vec<String> = synth::scale_set(4, &synth::power_of_two_sizes(3))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(names, want_sorted);
    let text = std::fs::read_to_string(out.join("bench-collective.json")).unwrap();
    let doc: results::Document = serde_json::from_str(&text).unwrap();
    assert_eq!(doc.tool_version, synth::SYNTH_VERSION);
    assert_eq!(doc.ranks, 4);
    for bad in [["--ranks", "3"], ["--sizes", "0"]] {
        let o = run(&["scale", out.to_str().unwrap(), bad[0], bad[1]]);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {o:?}");
    }
}
