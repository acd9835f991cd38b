//! A real headless browser for the HTML reports: Chromium (Debian's package, installed by
//! `scripts/testbed/setup_chromium.sh`, which the first use runs: nothing skips), one process per
//! page with a profile of its own, ended after [`TIMEOUT`].
//!
//! What a page wrote to its console is read from Chromium's log (`--enable-logging=stderr`):
//! Chromium 148 logs each console message, whatever its level, and each uncaught
//! exception as `[...:INFO:CONSOLE:LINE] "MESSAGE", source: URL (LINE)` (older versions:
//! `INFO:CONSOLE(LINE)`). The log does not carry the message's level, so every console
//! message counts: the reports write none.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::root;

/// The longest a page may take to load and settle.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// What Chromium made of a page.
#[derive(Debug)]
pub struct Loaded {
    /// The DOM after the page's scripts ran (`--dump-dom`), or empty for a screenshot.
    pub dom: String,
    /// The console messages and uncaught exceptions, in order.
    pub console: Vec<String>,
    /// Chromium's whole log, for failure messages.
    pub log: String,
}

impl Loaded {
    /// Fails unless the page rendered without a console message.
    pub fn assert_clean(&self, what: &str) {
        assert!(
            self.console.is_empty(),
            "{what}: console messages in Chromium: {:#?}",
            self.console
        );
    }
}

/// The Chromium binary (installed on first use).
pub fn chromium() -> &'static PathBuf {
    static CHROMIUM: OnceLock<PathBuf> = OnceLock::new();
    CHROMIUM.get_or_init(|| {
        let script = "scripts/testbed/setup_chromium.sh";
        let out = Command::new("bash")
            .arg(root().join(script))
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("run {script}: {e}"));
        assert!(
            out.status.success(),
            "the HTML report tests need Chromium: `bash {script}` could not install Debian's \
             chromium package (see its messages above)"
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

/// The console lines of a Chromium log: each message with its source.
pub fn console_messages(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|line| {
            let at = line.find(":CONSOLE")?;
            let rest = &line[at + ":CONSOLE".len()..];
            if !(rest.starts_with(':') || rest.starts_with('(')) {
                return None;
            }
            let end = rest.find("] ")?;
            Some(rest[end + 2..].to_string())
        })
        .collect()
}

/// Runs headless Chromium on `page` with `extra` flags; returns its stdout and log.
fn run(page: &Path, extra: &[String]) -> (String, String) {
    run_at(page, "", extra)
}

/// [`run`] on `page`'s address followed by `fragment` (`#...`).
fn run_at(page: &Path, fragment: &str, extra: &[String]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let out_path = profile.path().join("stdout");
    let log_path = profile.path().join("stderr");
    let page = page
        .canonicalize()
        .unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--enable-logging=stderr",
        "--v=0",
        "--no-first-run",
        "--hide-scrollbars",
    ])
    .arg(format!(
        "--user-data-dir={}",
        profile.path().join("profile").display()
    ))
    .args(extra)
    .arg(format!("file://{}{fragment}", page.display()))
    .stdin(Stdio::null())
    .stdout(std::fs::File::create(&out_path).unwrap())
    .stderr(std::fs::File::create(&log_path).unwrap())
    // Its own process group, so that a timeout ends the browser's helpers too.
    .process_group(0);
    let mut child = cmd.spawn().expect("start chromium");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            // SAFETY: kill(2) on the process group this test started.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!(
                "chromium on {} took more than {TIMEOUT:?}; its log:\n{}",
                page.display(),
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        status.success(),
        "chromium on {} failed ({status}); its log:\n{log}",
        page.display()
    );
    (stdout, log)
}

/// Loads `page` (a file) and returns its DOM after its scripts ran, and its console.
pub fn load(page: &Path) -> Loaded {
    load_at(page, "")
}

/// [`load`] of `page` at `fragment` (`#...`), which its script reads.
pub fn load_at(page: &Path, fragment: &str) -> Loaded {
    let (dom, log) = run_at(page, fragment, &["--dump-dom".to_string()]);
    assert!(
        dom.contains("</html>"),
        "chromium dumped no DOM for {}; its log:\n{log}",
        page.display()
    );
    Loaded {
        dom,
        console: console_messages(&log),
        log,
    }
}

/// Renders `page` into the PNG `png`, `width` × `height` pixels, and returns its console.
pub fn screenshot(page: &Path, png: &Path, width: u32, height: u32) -> Loaded {
    let (_, log) = run(
        page,
        &[
            format!("--screenshot={}", png.display()),
            format!("--window-size={width},{height}"),
        ],
    );
    let bytes = std::fs::read(png).unwrap_or_else(|e| panic!("{}: {e}\n{log}", png.display()));
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        png.display()
    );
    Loaded {
        dom: String::new(),
        console: console_messages(&log),
        log,
    }
}

/// The remote URLs a page would fetch: `http://`, `https://` and scheme-relative `//`
/// opening an attribute's value or a CSS `url(`, less the SVG namespace, which names a
/// URL without fetching it. A URL in the page's text (a server's address in a report)
/// fetches nothing and is not one.
pub fn remote_urls(dom: &str) -> Vec<String> {
    let mut found = Vec::new();
    for scheme in [
        "\"http://",
        "'http://",
        "(http://",
        "\"https://",
        "'https://",
        "(https://",
        "\"//",
        "'//",
        "(//",
    ] {
        let mut rest = dom;
        while let Some(at) = rest.find(scheme) {
            let tail = &rest[at + 1..];
            let end = tail[1..]
                .find(|c: char| "\"'()<>".contains(c) || c.is_whitespace())
                .map_or(tail.len(), |e| e + 1);
            let url = &tail[..end];
            if url != "http://www.w3.org/2000/svg" {
                found.push(url.to_string());
            }
            rest = &tail[end.max(1)..];
        }
    }
    found
}

/// Renders `page` in Chromium (DOM and screenshot), checks it is clean and names no
/// remote URL; returns its DOM.
pub fn rendered(page: &Path) -> String {
    let loaded = load(page);
    loaded.assert_clean(&page.display().to_string());
    assert_eq!(remote_urls(&loaded.dom), Vec::<String>::new());
    assert!(!loaded.dom.contains(" src=") && !loaded.dom.contains(" href="));
    let png = page.with_extension("png");
    screenshot(page, &png, 1200, 1600).assert_clean(&png.display().to_string());
    loaded.dom
}
