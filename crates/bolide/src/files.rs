//! Output files: checked before a run starts (a bad path fails fast), written whole or not at all
//! (a temporary sibling, then one rename).

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// A hidden sibling of `dest` with a purpose tag and this process's id.
pub fn sibling(dest: &Path, tag: &str) -> PathBuf {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    dest.with_file_name(format!(".{name}.{tag}.{}", std::process::id()))
}

/// Checks that `dest` can be written, by creating and removing a sibling; names the path on error.
pub fn check_writable(dest: &Path) -> Result<(), String> {
    if dest.is_dir() {
        return Err(format!("{} is a directory", dest.display()));
    }
    let probe = sibling(dest, "probe");
    match OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!("cannot write {}: {e}", dest.display())),
    }
}

/// Writes `dest` through `fill` into a temporary sibling, then renames it into place; on any
/// error the temporary file is removed and `dest` is untouched.
pub fn write_atomically(dest: &Path, fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>) -> io::Result<()> {
    let tmp = sibling(dest, "tmp");
    let result = (|| {
        let mut w = BufWriter::new(File::create(&tmp)?);
        fill(&mut w)?;
        w.flush()?;
        w.get_ref().sync_all()?;
        std::fs::rename(&tmp, dest)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_leaves_old_file_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("r.json");
        write_atomically(&dest, |w| w.write_all(b"first")).unwrap();
        let err = write_atomically(&dest, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("boom"))
        });
        assert!(err.is_err());
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "first");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary left");
    }

    #[test]
    fn unwritable_paths_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/dir/r.json");
        let msg = check_writable(&missing).unwrap_err();
        assert!(msg.contains("no/such/dir"), "{msg}");
        assert!(check_writable(dir.path()).unwrap_err().contains("is a directory"));
        assert!(check_writable(&dir.path().join("ok.json")).is_ok());
    }
}
