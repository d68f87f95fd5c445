//! bolide-probe carried in the binary: `bolide probe path` writes it once per version (whole, into
//! the user's cache directory) and says where, so that `NODE_OPTIONS="--require $(bolide probe
//! path)"` loads it into any Node.js or Meteor server without npm; `--probe NAME` with `--spawn`
//! adds it to the spawned command itself. The npm package `npm/bolide-probe` is the same file.

use std::path::PathBuf;

use crate::problem::Problem;

/// The probe's source, as `npm/bolide-probe/index.js` has it.
pub const SOURCE: &str = include_str!("../../../../npm/bolide-probe/index.js");

/// Where this binary's probe lives: `$XDG_CACHE_HOME/bolide` (or `~/.cache/bolide`, else the
/// temporary directory), named by bolide's version and the source's hash, so that two versions
/// never share a file and an unchanged one is written once.
pub fn path() -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    path_under(&cache)
}

/// The probe's file under the cache directory `cache`.
fn path_under(cache: &std::path::Path) -> PathBuf {
    let name = format!("bolide-probe-{}-{:016x}.js", env!("CARGO_PKG_VERSION"), fnv1a(SOURCE.as_bytes()));
    cache.join("bolide").join(name)
}

/// Writes the probe where [`path`] says, unless it is there already with the same bytes; the
/// path, or why it could not be written.
pub fn write() -> Result<PathBuf, Problem> {
    write_at(path())
}

fn write_at(path: PathBuf) -> Result<PathBuf, Problem> {
    if std::fs::read(&path).is_ok_and(|b| b == SOURCE.as_bytes()) {
        return Ok(path);
    }
    let dir = path.parent().expect("a file in a directory");
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    crate::files::write_atomically(&path, |w| std::io::Write::write_all(w, SOURCE.as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// `NODE_OPTIONS` with the probe required, after whatever the environment already had.
pub fn node_options(existing: Option<&str>, probe: &std::path::Path) -> String {
    // Node reads NODE_OPTIONS with shell-like quoting: a path with a space is quoted.
    // Inside Node's double quotes `\` and `"` are escaped.
    let path = probe.display().to_string().replace('\\', "\\\\").replace('"', "\\\"");
    let required = format!("--require \"{path}\"");
    match existing.map(str::trim).filter(|e| !e.is_empty()) {
        Some(e) => format!("{e} {required}"),
        None => required,
    }
}

/// FNV-1a, 64 bits: a stable name for the source's content.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_is_written_once_and_named_by_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_at(path_under(dir.path())).unwrap();
        let modified = std::fs::metadata(&first).unwrap().modified().unwrap();
        let again = write_at(path_under(dir.path())).unwrap();
        assert_eq!(first, again);
        assert_eq!(std::fs::metadata(&again).unwrap().modified().unwrap(), modified, "written once");
        assert!(first.starts_with(dir.path().join("bolide")), "{}", first.display());
        assert_eq!(std::fs::read_to_string(&first).unwrap(), SOURCE);
        assert!(SOURCE.contains("BOLIDE_PROBE"));
        assert_eq!(node_options(None, std::path::Path::new("/c/p.js")), "--require \"/c/p.js\"");
        assert_eq!(
            node_options(Some("--max-old-space-size=4096"), std::path::Path::new("/c/p.js")),
            "--max-old-space-size=4096 --require \"/c/p.js\""
        );
        assert_eq!(node_options(None, std::path::Path::new("/a \"b\\c/p.js")), "--require \"/a \\\"b\\\\c/p.js\"");
    }
}
