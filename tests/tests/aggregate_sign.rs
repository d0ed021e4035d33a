//! Signed reports checked by stock OpenSSH: the exact command the report footer prints
//! must accept an untouched bundle and reject one with any byte changed.

#![allow(clippy::unwrap_used)] // test and example code: a panic is the failure report

mod aggregate_common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use aggregate_common::*;
use integration::{run, text};

/// The customer's command, exactly as the Markdown report prints it.
fn footer_command(bundle: &Path) -> String {
    let md = fs::read_to_string(bundle.join("report.md")).unwrap();
    let after = md
        .split("**Signed.**")
        .nth(1)
        .expect("report.md has a signature footer");
    let block = after.split("```").nth(1).expect("a fenced command");
    let cmd = block.trim().to_string();
    assert!(cmd.starts_with("ssh-keygen -Y verify"), "{cmd}");
    cmd
}

/// Runs the footer command in the bundle with the customer's own allowed_signers file
/// (built from the public key they received, not from the bundle).
fn customer_verify(bundle: &Path, trusted_pub: &Path) -> (bool, String) {
    // The customer's own allowed_signers, made from the key received out of band, outside
    // the bundle: the footer's command reads it from $SIGNERS, never the bundle's copy.
    let public = fs::read_to_string(trusted_pub).unwrap();
    let signers = bundle.with_extension("customer_signers");
    fs::write(&signers, format!("fabcheck {public}")).unwrap();
    let command = footer_command(bundle);
    assert!(!command.contains("-f allowed_signers"), "{command}");
    let out = run(
        Command::new("sh")
            .arg("-c")
            .arg(command)
            .env("SIGNERS", &signers)
            .current_dir(bundle),
        Duration::from_secs(60),
    );
    let (o, e) = text(&out);
    (out.status.success(), format!("{o}{e}"))
}

#[test]
fn signed_report_verifies_with_openssh_and_every_tampered_file_fails() {
    require("ssh-keygen", "openssh-client");
    require("sha256sum", "coreutils");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    synth_set(dir, "data", 8, 26);
    let profile = write(dir, "pass.toml", PASSING_PROFILE);

    let out = aggregate(dir, &["keygen", "signing.key"]);
    expect_code(&out, 0, "keygen");
    let mode = fs::metadata(dir.join("signing.key")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600,
        "private key must be mode 0600"
    );
    // Never overwritten.
    let before = fs::read(dir.join("signing.key")).unwrap();
    let out = aggregate(dir, &["keygen", "signing.key"]);
    expect_code(&out, 2, "keygen over an existing key");
    assert!(text(&out).1.contains("already exists"));
    assert_eq!(fs::read(dir.join("signing.key")).unwrap(), before);

    let out = aggregate(
        dir,
        &[
            "report",
            "data",
            "--profile",
            &profile,
            "--out",
            "bundle",
            "--sign",
            "signing.key",
        ],
    );
    expect_code(&out, 0, "signed report of a passing set");
    let (stdout, _) = text(&out);
    assert!(stdout.contains("verdict: PASS"), "{stdout}");
    let bundle = dir.join("bundle");

    // The private key never lands in any output.
    let private = fs::read_to_string(dir.join("signing.key")).unwrap();
    let secret_lines: Vec<&str> = private
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() >= 20)
        .collect();
    assert!(!secret_lines.is_empty());
    for f in files_under(&bundle) {
        let body = String::from_utf8_lossy(&fs::read(bundle.join(&f)).unwrap()).into_owned();
        assert!(!body.contains("PRIVATE KEY"), "{f} holds a private key");
        for l in &secret_lines {
            assert!(!body.contains(l), "{f} holds a line of the private key");
        }
    }
    for l in &secret_lines {
        assert!(!stdout.contains(l));
    }

    // Untouched: stock OpenSSH and coreutils accept it, so does aggregate verify.
    let pristine = dir.join("pristine");
    copy_tree(&bundle, &pristine);
    let (ok, log) = customer_verify(&bundle, &dir.join("signing.key.pub"));
    assert!(
        ok,
        "customer verification of an untouched bundle failed:\n{log}"
    );
    assert!(log.contains("Good \"fabcheck-report\" signature"), "{log}");
    let out = aggregate(dir, &["verify", "bundle", "--key", "signing.key.pub"]);
    expect_code(&out, 0, "aggregate verify");

    // One changed byte in any file: both verifications fail, and aggregate names the file.
    let mut tampered = 0;
    for f in files_under(&pristine) {
        if f == "allowed_signers" {
            continue; // the customer uses their own
        }
        let case = dir.join(format!("case{tampered}"));
        copy_tree(&pristine, &case);
        flip_middle_byte(&case.join(&f));
        let (ok, log) = customer_verify(&case, &dir.join("signing.key.pub"));
        assert!(
            !ok,
            "OpenSSH/sha256sum accepted a bundle with {f} changed:\n{log}"
        );
        let out = aggregate(
            dir,
            &["verify", case.to_str().unwrap(), "--key", "signing.key.pub"],
        );
        expect_code(&out, 1, &format!("aggregate verify with {f} changed"));
        let (o, _) = text(&out);
        if f != "MANIFEST.sha256" && f != "MANIFEST.sha256.sig" {
            assert!(o.contains(&format!("CHANGED: {f}")), "{f} not named:\n{o}");
        }
        tampered += 1;
    }
    assert!(tampered >= 10, "only {tampered} files in the bundle");
}

#[test]
fn a_bundle_resigned_by_another_key_is_rejected() {
    require("ssh-keygen", "openssh-client");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    synth_set(dir, "data", 4, 8);
    let profile = write(dir, "pass.toml", PASSING_PROFILE);
    expect_code(&aggregate(dir, &["keygen", "vendor.key"]), 0, "keygen");
    let out = aggregate(
        dir,
        &[
            "report",
            "data",
            "-p",
            &profile,
            "-o",
            "bundle",
            "--sign",
            "vendor.key",
        ],
    );
    assert!(code(&out) <= 1, "report failed: {:?}", text(&out));
    let bundle = dir.join("bundle");

    // An attacker edits the verdict, rebuilds the manifest and signs it with their own key
    // using stock ssh-keygen, shipping their key in the bundle's allowed_signers.
    let html = fs::read_to_string(bundle.join("report.html")).unwrap();
    fs::write(bundle.join("report.html"), html.replace("FAIL", "PASS")).unwrap();
    let status = Command::new("sh")
        .arg("-c")
        .arg(
            "ssh-keygen -q -t ed25519 -N '' -f ../attacker.key && \
             grep -v '^$' MANIFEST.sha256 | while read -r h p; do echo \"$(sha256sum \"$p\" | cut -d' ' -f1)  $p\"; done > M.new && \
             mv M.new MANIFEST.sha256 && rm -f MANIFEST.sha256.sig && \
             ssh-keygen -q -Y sign -f ../attacker.key -n fabcheck-report MANIFEST.sha256 && \
             echo \"fabcheck $(cat ../attacker.key.pub)\" > allowed_signers",
        )
        .current_dir(&bundle)
        .status()
        .unwrap();
    assert!(status.success());
    // Self-consistent against the attacker's own key...
    let out = aggregate(dir, &["verify", "bundle"]);
    expect_code(&out, 0, "verify against the bundle's own (attacker) key");
    assert!(text(&out).0.contains("trust it only if it matches"));
    // ...but not against the vendor's key, in aggregate or in OpenSSH.
    let out = aggregate(dir, &["verify", "bundle", "--key", "vendor.key.pub"]);
    expect_code(&out, 1, "verify against the vendor key");
    let (ok, log) = customer_verify(&bundle, &dir.join("vendor.key.pub"));
    assert!(!ok, "OpenSSH accepted the attacker's signature:\n{log}");
}
