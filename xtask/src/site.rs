//! Builds what `draft-studio serve` needs: the server binary and, in the site folder, the
//! hydrating wasm bundle, its JavaScript glue, the stylesheet and the public assets; and the
//! `vllm-sim` binary that stands in for vLLM in the demo and the browser tests.
//!
//! This does what `cargo leptos build` did for this workspace, with the tools the workspace has
//! anyway (cargo and the wasm-bindgen CLI pinned by Cargo.lock), so a fresh machine does not
//! spend half an hour compiling cargo-leptos. The file names are the ones Leptos'
//! `HydrationScripts` asks for when the crate is built without cargo-leptos' environment:
//! `pkg/draft-studio.js` and `pkg/draft-studio_bg.wasm` (wasm-bindgen's own names), and the app
//! links `pkg/draft-studio.css`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::step::{self, Estimate, Failure, Progress};

/// Leptos' `output_name` (server/src/leptos_config.rs): the bundle's file names.
const OUTPUT_NAME: &str = "draft-studio";
const WASM_TARGET: &str = "wasm32-unknown-unknown";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    Debug,
    Release,
}

/// The workspace this xtask was started in. Read at run time (`cargo run` and `cargo test` set
/// `CARGO_MANIFEST_DIR`): a binary built for another clone into a shared target folder must not
/// build that clone.
pub fn workspace_root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    manifest_dir.parent().expect("xtask lives in the workspace").to_path_buf()
}

/// Where everything is read from and written to.
#[derive(Debug)]
pub struct Layout {
    pub root: PathBuf,
    pub target_dir: PathBuf,
    pub site_root: PathBuf,
    pub profile: Profile,
}

impl Layout {
    /// From the environment the scripts set: `CARGO_TARGET_DIR` (else `target/`) and
    /// `DS_SITE_ROOT` (else `target/site`, the server's default).
    pub fn from_env(root: PathBuf, profile: Profile) -> Self {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let target_dir = var("CARGO_TARGET_DIR").unwrap_or_else(|| root.join("target"));
        let site_root = var("DS_SITE_ROOT").unwrap_or_else(|| root.join("target/site"));
        Self { root, target_dir, site_root, profile }
    }

    /// The wasm build has a target folder of its own, so it runs beside the server's build
    /// instead of waiting on cargo's lock (cargo-leptos does the same with `target/front`).
    fn front_target_dir(&self) -> PathBuf {
        self.target_dir.join("front")
    }

    fn wasm_profile(&self) -> &'static str {
        match self.profile {
            Profile::Debug => "dev",
            // Size-optimised, server keeps opt-level 3 (Cargo.toml).
            Profile::Release => "wasm-release",
        }
    }

    fn wasm_file(&self) -> PathBuf {
        let dir = match self.profile {
            Profile::Debug => "debug",
            Profile::Release => "wasm-release",
        };
        self.front_target_dir().join(WASM_TARGET).join(dir).join("frontend.wasm")
    }

    pub fn server_binary(&self) -> PathBuf {
        let dir = match self.profile {
            Profile::Debug => "debug",
            Profile::Release => "release",
        };
        self.target_dir.join(dir).join("draft-studio")
    }

    fn pkg_dir(&self) -> PathBuf {
        self.site_root.join("pkg")
    }

    fn front_log(&self) -> PathBuf {
        self.front_target_dir().join("build.log")
    }
}

const COMPILE: Estimate = Estimate { cold: "18 min on 2 cores", warm: "seconds to a minute" };
const BINDGEN: Estimate = Estimate { cold: "15 s", warm: "a few seconds" };
const ASSETS: Estimate = Estimate { cold: "a second", warm: "a second" };

pub fn build(layout: &Layout) -> Result<(), Failure> {
    let bindgen = wasm_bindgen_matching_lock(&layout.root)?;
    let mut progress = Progress::new(3);

    let cold = !layout.server_binary().exists() || !layout.wasm_file().exists();
    let clock = progress.start(
        "compiling the server, the simulator and the browser bundle side by side",
        COMPILE,
        cold,
    );
    let front = spawn_front_build(layout)?;
    let server = server_build(layout);
    let front = wait_front_build(layout, front);
    server?;
    front?;
    progress.finish(clock);

    let clock = progress.start("binding the wasm bundle to JavaScript (wasm-bindgen)", BINDGEN, cold);
    bind(layout, &bindgen)?;
    progress.finish(clock);

    let clock = progress.start("copying the stylesheet and public assets", ASSETS, cold);
    copy_assets(layout)?;
    progress.finish(clock);

    eprintln!(
        "\x1b[1m==> built in {}:\x1b[0m {} (and vllm-sim beside it), {}",
        progress.total_elapsed(),
        layout.server_binary().display(),
        layout.pkg_dir().display()
    );
    Ok(())
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.arg("build").arg("--locked");
    cmd
}

const COMPILE_FIX: &str =
    "the compiler's errors above name the file; if you changed no code, check free disk \
     space (`df -h`), and if you changed a SQL query, run scripts/prepare-sqlx.sh";

/// The server and the simulator (the demo endpoint, the browser tests' vLLM) in one cargo run:
/// built apart, their shared dependencies would unify to different features and compile twice.
fn server_build(layout: &Layout) -> Result<(), Failure> {
    let mut cmd = cargo();
    cmd.args(["--package", "server", "--bin", "draft-studio", "--package", "vllm-sim", "--bin", "vllm-sim"])
        .env("CARGO_TARGET_DIR", &layout.target_dir);
    if layout.profile == Profile::Release {
        cmd.arg("--release");
    }
    step::run("compiling the server", &mut cmd, COMPILE_FIX)
}

/// Starts the wasm build with its output in a log file (the server build has the terminal).
fn spawn_front_build(layout: &Layout) -> Result<Child, Failure> {
    let step = "compiling the browser bundle";
    fs::create_dir_all(layout.front_target_dir())
        .map_err(|e| step::io(step, &layout.front_target_dir(), e, "check the target folder is writable"))?;
    let log = fs::File::create(layout.front_log())
        .map_err(|e| step::io(step, &layout.front_log(), e, "check the target folder is writable"))?;
    let log_err = log.try_clone().map_err(|e| step::io(step, &layout.front_log(), e, "retry"))?;
    let mut cmd = cargo();
    cmd.args(["--package", "frontend", "--lib", "--target", WASM_TARGET, "--profile", layout.wasm_profile()])
        .env("CARGO_TARGET_DIR", layout.front_target_dir())
        .env("CARGO_TERM_COLOR", "never")
        .env("CARGO_TERM_PROGRESS_WHEN", "never")
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err));
    cmd.spawn().map_err(|e| Failure {
        step: step.into(),
        what: format!("could not start cargo: {e}"),
        fix: "check that cargo is on the PATH".into(),
    })
}

fn wait_front_build(layout: &Layout, mut child: Child) -> Result<(), Failure> {
    let step = "compiling the browser bundle";
    let status = child.wait().map_err(|e| step::io(step, &layout.front_log(), e, "retry the build"))?;
    if status.success() {
        return Ok(());
    }
    let log = fs::read_to_string(layout.front_log()).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(40).collect();
    for line in tail.into_iter().rev() {
        eprintln!("    {line}");
    }
    Err(Failure {
        step: step.into(),
        what: format!(
            "cargo exited with {status}; its last lines are above, all of it in {}",
            layout.front_log().display()
        ),
        fix: format!(
            "{COMPILE_FIX}; a missing target means `rustup target add {WASM_TARGET}` (scripts/run.sh does it)"
        ),
    })
}

/// The wasm-bindgen CLI must be the exact version of the `wasm-bindgen` crate in Cargo.lock.
fn wasm_bindgen_matching_lock(root: &Path) -> Result<PathBuf, Failure> {
    let step = "checking wasm-bindgen";
    let lock = fs::read_to_string(root.join("Cargo.lock"))
        .map_err(|e| step::io(step, &root.join("Cargo.lock"), e, "run from a checkout of the workspace"))?;
    let want = locked_version(&lock, "wasm-bindgen").ok_or_else(|| Failure {
        step: step.into(),
        what: "Cargo.lock has no wasm-bindgen package".into(),
        fix: "restore Cargo.lock from git".into(),
    })?;
    let install = format!("cargo install wasm-bindgen-cli --version {want} (scripts/run.sh does it for you)");
    let output = Command::new("wasm-bindgen").arg("--version").output().map_err(|_| Failure {
        step: step.into(),
        what: "wasm-bindgen is not on the PATH".into(),
        fix: install.clone(),
    })?;
    let have = String::from_utf8_lossy(&output.stdout);
    let have = have.split_whitespace().nth(1).unwrap_or("").to_string();
    if have != want {
        return Err(Failure {
            step: step.into(),
            what: format!("wasm-bindgen {have} is on the PATH, Cargo.lock pins {want}"),
            fix: install,
        });
    }
    Ok(PathBuf::from("wasm-bindgen"))
}

/// The `version` of package `name` in a Cargo.lock.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let header = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    lines.find(|l| l.trim() == header)?;
    let version = lines.next()?.trim().strip_prefix("version = \"")?.strip_suffix('"')?;
    Some(version.to_string())
}

fn bind(layout: &Layout, bindgen: &Path) -> Result<(), Failure> {
    let step = "binding the wasm bundle";
    let pkg = layout.pkg_dir();
    // Leftovers of an older build (or of cargo-leptos' file names) must not be served.
    if pkg.exists() {
        fs::remove_dir_all(&pkg).map_err(|e| step::io(step, &pkg, e, "check the site folder is writable"))?;
    }
    let mut cmd = Command::new(bindgen);
    // The name section (function names for stack traces) is more than half of a debug bundle:
    // 17 of 29 MB. cargo-leptos left it out too; panics still print their message.
    cmd.args(["--target", "web", "--no-typescript", "--remove-name-section", "--remove-producers-section"])
        .args(["--out-name", OUTPUT_NAME])
        .arg("--out-dir")
        .arg(&pkg)
        .arg(layout.wasm_file());
    step::run(step, &mut cmd, "if the versions differ, reinstall wasm-bindgen-cli at Cargo.lock's version")?;
    if layout.profile == Profile::Release {
        shrink(&pkg.join(format!("{OUTPUT_NAME}_bg.wasm")))?;
    }
    Ok(())
}

/// Release bundles go through binaryen's `wasm-opt -Oz` when it is installed, as cargo-leptos
/// did; without it the bundle still works, only larger, and the build says so.
fn shrink(wasm: &Path) -> Result<(), Failure> {
    if Command::new("wasm-opt").arg("--version").output().is_err() {
        eprintln!("    note: wasm-opt not found, the release bundle is not size-optimised (apt-get install binaryen)");
        return Ok(());
    }
    let mut cmd = Command::new("wasm-opt");
    // The features rustc enables by default for wasm32 since 1.87.
    cmd.args([
        "-Oz",
        "--enable-bulk-memory",
        "--enable-nontrapping-float-to-int",
        "--enable-sign-ext",
        "--enable-mutable-globals",
        "--enable-reference-types",
        "--enable-multivalue",
    ])
    .arg(wasm)
    .arg("-o")
    .arg(wasm);
    step::run("optimising the wasm bundle", &mut cmd, "update binaryen, or uninstall it to skip this step")
}

fn copy_assets(layout: &Layout) -> Result<(), Failure> {
    let step = "copying assets";
    let fix = "check the site folder is writable";
    let css = layout.pkg_dir().join(format!("{OUTPUT_NAME}.css"));
    fs::copy(layout.root.join("style/main.css"), &css).map_err(|e| step::io(step, &css, e, fix))?;
    copy_tree(&layout.root.join("public"), &layout.site_root)
        .map_err(|e| step::io(step, &layout.site_root, e, fix))
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &dest)?;
        } else {
            fs::copy(entry.path(), dest)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_packages_version_in_the_lock() {
        let lock = "[[package]]\nname = \"wasm-bindgen-futures\"\nversion = \"0.4.1\"\n\n\
                    [[package]]\nname = \"wasm-bindgen\"\nversion = \"0.2.118\"\n";
        assert_eq!(locked_version(lock, "wasm-bindgen").as_deref(), Some("0.2.118"));
        assert_eq!(locked_version(lock, "leptos"), None);
    }

    #[test]
    fn the_workspace_lock_pins_the_bindgen_the_scripts_install() {
        let root = workspace_root();
        let lock = fs::read_to_string(root.join("Cargo.lock")).unwrap();
        let manifest = fs::read_to_string(root.join("Cargo.toml")).unwrap();
        let pinned = locked_version(&lock, "wasm-bindgen").unwrap();
        assert!(manifest.contains(&format!("wasm-bindgen = \"={pinned}\"")), "Cargo.toml pins {pinned}");
    }

    #[test]
    fn release_and_debug_write_where_the_server_looks() {
        let layout = |profile| Layout {
            root: "/w".into(),
            target_dir: "/t".into(),
            site_root: "/w/target/site".into(),
            profile,
        };
        assert_eq!(layout(Profile::Debug).server_binary(), Path::new("/t/debug/draft-studio"));
        assert_eq!(layout(Profile::Release).server_binary(), Path::new("/t/release/draft-studio"));
        assert_eq!(
            layout(Profile::Release).wasm_file(),
            Path::new("/t/front/wasm32-unknown-unknown/wasm-release/frontend.wasm")
        );
        assert_eq!(layout(Profile::Debug).pkg_dir(), Path::new("/w/target/site/pkg"));
    }

    #[test]
    fn copies_nested_assets() {
        let dir = std::env::temp_dir().join(format!("xtask-copy-{}", std::process::id()));
        let (from, to) = (dir.join("from"), dir.join("to"));
        fs::create_dir_all(from.join("icons")).unwrap();
        fs::write(from.join("favicon.svg"), "<svg/>").unwrap();
        fs::write(from.join("icons/a.png"), "png").unwrap();
        copy_tree(&from, &to).unwrap();
        assert_eq!(fs::read_to_string(to.join("icons/a.png")).unwrap(), "png");
        assert_eq!(fs::read_to_string(to.join("favicon.svg")).unwrap(), "<svg/>");
        fs::remove_dir_all(dir).unwrap();
    }
}
