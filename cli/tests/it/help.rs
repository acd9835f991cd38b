//! The help a user reads: every command's `--help` is compared with its snapshot in
//! tests/help/, so any change to it shows as a diff in review. After a deliberate change,
//! `BERTQA_UPDATE_HELP=1 cargo test --test it help` rewrites the snapshots.

use std::process::Command;

use crate::common::root;

/// The commands, `""` being `bertqa` itself.
const COMMANDS: [&str; 10] = [
    "", "models", "ask", "compare", "eval", "features", "merge", "perf", "score", "tune",
];

/// `bertqa <command> <flag>` at a fixed width, with no `BERTQA_URL` shown as `--url`'s.
fn help(command: &str, flag: &str) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bertqa"));
    if !command.is_empty() {
        c.arg(command);
    }
    let o = c
        .arg(flag)
        .env("COLUMNS", "100")
        .env_remove("BERTQA_URL")
        .output()
        .expect("run bertqa");
    assert_eq!(o.status.code(), Some(0), "bertqa {command} {flag}");
    String::from_utf8(o.stdout).expect("help is UTF-8")
}

#[test]
fn every_commands_help_matches_its_snapshot() {
    let update = std::env::var_os("BERTQA_UPDATE_HELP").is_some();
    let dir = root().join("tests/help");
    let mut stale = Vec::new();
    for command in COMMANDS {
        let got = help(command, "--help");
        let name = if command.is_empty() {
            "bertqa"
        } else {
            command
        };
        let path = dir.join(format!("{name}.txt"));
        if update {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if got != want {
            stale.push(format!("{}:\n{got}", path.display()));
        }
    }
    assert!(
        stale.is_empty(),
        "help differs from its snapshot (BERTQA_UPDATE_HELP=1 rewrites them once the \
         change is meant):\n{}",
        stale.join("\n")
    );
}

/// One line per flag: `--help` is the short help, with no long form hidden behind it.
#[test]
fn help_is_the_same_with_h_and_help() {
    for command in COMMANDS {
        assert_eq!(
            help(command, "-h"),
            help(command, "--help"),
            "bertqa {command}"
        );
    }
}
