//! A power-loss simulator: an in-memory file system that remembers what was written since each file's last
//! sync and each directory's last sync, and at a simulated power loss keeps only what a real disk must keep
//! (the pattern of TigerBeetle's and FoundationDB's simulated disks).
//!
//! - A file's data is durable up to its last [`VfsFile::sync`]; the writes after it (appends, length changes)
//!   survive a crash as a random prefix, the last one possibly torn at a random byte, and sometimes with an
//!   earlier write lost as zeros (its pages never reached the disk while later ones did).
//! - A directory's entries are durable as of its last [`Vfs::sync_dir`]; the creations, renames and removals
//!   after it survive as a random prefix (each one atomic, as in a journaling file system). A file whose entry did
//!   not survive is gone, however well its data was synced.
//! - Fail-stop: [`SimFs::power_fails_at`] makes the n-th mutating operation the last one — it takes effect and
//!   fails, and every mutating operation after it fails — so a workload stops exactly there; [`SimFs::crash`]
//!   then returns the file system a reboot would find.
//! - [`SimFs::break_sync`] makes chosen syncs silently do nothing: the test-only switch that shows the crash sweep
//!   would notice a missing fsync.
//!
//! Everything is deterministic for a given seed; paths are taken component by component from an implicit root.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io;
use std::path::{Component, Path};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::vfs::{Entry, OpenFor, Vfs, VfsFile};

/// A small deterministic generator (xorshift64*) for crash outcomes.
#[derive(Debug, Clone)]
pub struct SimRng(u64);

impl SimRng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        SimRng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// A number in `[0, bound)` (0 when `bound` is 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound.max(1)
    }
}

/// Syncs the simulator can be told to ignore (see [`SimFs::break_sync`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrokenSync {
    /// `sync` of files whose name ends with this suffix does nothing.
    FilesEndingWith(String),
    /// `sync_dir` does nothing.
    Directories,
}

/// Counters of what the simulator saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Mutating operations so far (the crash points a workload offers).
    pub mutations: u64,
    /// File syncs.
    pub file_syncs: u64,
    /// Directory syncs.
    pub dir_syncs: u64,
    /// Bytes read from files (whole-file reads and reads at an offset).
    pub bytes_read: u64,
}

#[derive(Debug, Clone)]
enum FileOp {
    Append(Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Clone)]
enum DirOp {
    Link(String, u64),
    Unlink(String),
    Rename { from: String, to: String, id: u64 },
}

#[derive(Debug, Clone, Default)]
struct FileNode {
    data: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<FileOp>,
}

#[derive(Debug, Clone, Default)]
struct DirNode {
    entries: BTreeMap<String, u64>,
    durable: BTreeMap<String, u64>,
    pending: Vec<DirOp>,
}

#[derive(Debug, Clone)]
enum Node {
    File(FileNode),
    Dir(DirNode),
}

const ROOT: u64 = 0;

#[derive(Debug)]
struct State {
    nodes: HashMap<u64, Node>,
    next_id: u64,
    stats: SimStats,
    power_fails_at: Option<u64>,
    broken: Vec<BrokenSync>,
}

/// The simulated file system; clones share it.
#[derive(Clone)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for SimFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFs").field("stats", &self.stats()).finish()
    }
}

impl Default for SimFs {
    fn default() -> Self {
        Self::new()
    }
}

fn power_lost() -> io::Error {
    io::Error::other("simulated power loss")
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{} not found", path.display()))
}

fn components(path: &Path) -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => out.push(name.to_string_lossy().into_owned()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "the simulator does not resolve `..`",
                ))
            }
        }
    }
    Ok(out)
}

fn apply_dir_op(entries: &mut BTreeMap<String, u64>, op: &DirOp) {
    match op {
        DirOp::Link(name, id) => {
            entries.insert(name.clone(), *id);
        }
        DirOp::Unlink(name) => {
            entries.remove(name);
        }
        DirOp::Rename { from, to, id } => {
            entries.remove(from);
            entries.insert(to.clone(), *id);
        }
    }
}

fn apply_file_op(data: &mut Vec<u8>, op: &FileOp) {
    match op {
        FileOp::Append(bytes) => data.extend_from_slice(bytes),
        FileOp::SetLen(len) => data.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
    }
}

impl State {
    fn dir(&self, id: u64) -> Option<&DirNode> {
        match self.nodes.get(&id) {
            Some(Node::Dir(dir)) => Some(dir),
            _ => None,
        }
    }

    fn dir_mut(&mut self, id: u64) -> Option<&mut DirNode> {
        match self.nodes.get_mut(&id) {
            Some(Node::Dir(dir)) => Some(dir),
            _ => None,
        }
    }

    fn file_mut(&mut self, id: u64) -> Option<&mut FileNode> {
        match self.nodes.get_mut(&id) {
            Some(Node::File(file)) => Some(file),
            _ => None,
        }
    }

    /// The node at `path`.
    fn lookup(&self, path: &Path) -> io::Result<u64> {
        let mut at = ROOT;
        for name in components(path)? {
            at = *self
                .dir(at)
                .and_then(|dir| dir.entries.get(&name))
                .ok_or_else(|| not_found(path))?;
        }
        Ok(at)
    }

    /// The directory holding `path` and the last component's name.
    fn parent(&self, path: &Path) -> io::Result<(u64, String)> {
        let mut names = components(path)?;
        let name = names
            .pop()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the root has no parent"))?;
        let mut at = ROOT;
        for part in names {
            at = *self
                .dir(at)
                .and_then(|dir| dir.entries.get(&part))
                .ok_or_else(|| not_found(path))?;
        }
        if self.dir(at).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not in a directory", path.display()),
            ));
        }
        Ok((at, name))
    }

    /// Counts a mutating operation; fails once the power is out. The failing operation itself still takes
    /// effect (`Ok(true)` tells the caller to apply it and then report the failure).
    fn mutation(&mut self) -> io::Result<bool> {
        if self.power_fails_at.is_some_and(|at| self.stats.mutations >= at) {
            return Err(power_lost());
        }
        self.stats.mutations += 1;
        Ok(self.power_fails_at == Some(self.stats.mutations))
    }

    fn new_node(&mut self, node: Node) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.nodes.insert(id, node);
        id
    }

    fn dir_op(&mut self, dir: u64, op: DirOp) {
        if let Some(node) = self.dir_mut(dir) {
            apply_dir_op(&mut node.entries, &op);
            node.pending.push(op);
        }
    }

    fn file_op(&mut self, id: u64, op: FileOp) {
        if let Some(file) = self.file_mut(id) {
            apply_file_op(&mut file.data, &op);
            file.pending.push(op);
        }
    }

    fn is_broken(&self, what: &BrokenSync) -> bool {
        self.broken.contains(what)
    }

    fn file_sync_is_broken(&self, name: &str) -> bool {
        self.broken
            .iter()
            .any(|b| matches!(b, BrokenSync::FilesEndingWith(suffix) if name.ends_with(suffix.as_str())))
    }
}

/// Finishes a mutating operation: `Err` when it was the one the power failed at.
fn outcome(last: bool) -> io::Result<()> {
    if last {
        Err(power_lost())
    } else {
        Ok(())
    }
}

impl SimFs {
    /// An empty file system (only the root directory).
    pub fn new() -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(ROOT, Node::Dir(DirNode::default()));
        SimFs {
            state: Arc::new(Mutex::new(State {
                nodes,
                next_id: ROOT + 1,
                stats: SimStats::default(),
                power_fails_at: None,
                broken: Vec::new(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent maps behind (every change is one insert or push).
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What happened so far.
    pub fn stats(&self) -> SimStats {
        self.lock().stats
    }

    /// Makes the `n`-th mutating operation from the start (counting from 1) the last: it takes effect and fails,
    /// and every later one fails.
    pub fn power_fails_at(&self, n: u64) {
        self.lock().power_fails_at = Some(n);
    }

    /// True once the power failed.
    pub fn power_failed(&self) -> bool {
        let state = self.lock();
        state.power_fails_at.is_some_and(|at| state.stats.mutations >= at)
    }

    /// Makes a kind of sync silently do nothing (test-only: shows that the crash sweep notices).
    pub fn break_sync(&self, which: BrokenSync) {
        self.lock().broken.push(which);
    }

    /// The file system a reboot would find after a power loss now: durable state plus a random part of what was
    /// not synced (see the module docs). The returned file system has everything it holds durable.
    pub fn crash(&self, rng: &mut SimRng) -> SimFs {
        let state = self.lock();
        let mut nodes = HashMap::new();
        let mut stack = vec![ROOT];
        while let Some(id) = stack.pop() {
            let Some(node) = state.nodes.get(&id) else {
                continue;
            };
            let survived = match node {
                Node::Dir(dir) => {
                    let mut entries = dir.durable.clone();
                    let kept = rng.below(dir.pending.len() as u64 + 1) as usize;
                    for op in &dir.pending[..kept] {
                        apply_dir_op(&mut entries, op);
                    }
                    stack.extend(
                        entries
                            .values()
                            .copied()
                            .filter(|child| !nodes.contains_key(child)),
                    );
                    Node::Dir(DirNode {
                        durable: entries.clone(),
                        entries,
                        pending: Vec::new(),
                    })
                }
                Node::File(file) => {
                    let data = Self::surviving_data(file, rng);
                    Node::File(FileNode {
                        durable: data.clone(),
                        data,
                        pending: Vec::new(),
                    })
                }
            };
            nodes.insert(id, survived);
        }
        SimFs {
            state: Arc::new(Mutex::new(State {
                nodes,
                next_id: state.next_id,
                stats: SimStats::default(),
                power_fails_at: None,
                broken: state.broken.clone(),
            })),
        }
    }

    /// A file's content after a power loss: the synced data, then a random prefix of the later writes, the last
    /// one possibly torn; in a quarter of the cases an earlier write of that prefix is lost as zeros.
    fn surviving_data(file: &FileNode, rng: &mut SimRng) -> Vec<u8> {
        let mut data = file.durable.clone();
        let kept = rng.below(file.pending.len() as u64 + 1) as usize;
        let zeroed = (kept > 1 && rng.below(4) == 0).then(|| rng.below(kept as u64 - 1) as usize);
        for (index, op) in file.pending[..kept].iter().enumerate() {
            match op {
                FileOp::Append(bytes) if index + 1 == kept => {
                    let torn = rng.below(bytes.len() as u64 + 1) as usize;
                    data.extend_from_slice(&bytes[..torn]);
                }
                FileOp::Append(bytes) if Some(index) == zeroed => {
                    data.resize(data.len() + bytes.len(), 0);
                }
                op => apply_file_op(&mut data, op),
            }
        }
        data
    }

    /// One line per file and directory: its path, its length now and as synced, and how many writes since (for
    /// a failing test's report).
    pub fn listing(&self) -> String {
        let state = self.lock();
        let mut out = String::new();
        let mut stack = vec![(String::new(), ROOT)];
        while let Some((path, id)) = stack.pop() {
            match state.nodes.get(&id) {
                Some(Node::Dir(dir)) => {
                    out.push_str(&format!(
                        "{path}/ ({} entry changes unsynced)\n",
                        dir.pending.len()
                    ));
                    for (name, child) in dir.entries.iter().rev() {
                        stack.push((format!("{path}/{name}"), *child));
                    }
                }
                Some(Node::File(file)) => out.push_str(&format!(
                    "{path}: {} bytes, {} synced, {} writes unsynced\n",
                    file.data.len(),
                    file.durable.len(),
                    file.pending.len()
                )),
                None => {}
            }
        }
        out
    }

    /// A file's current contents (for tests' own checks).
    pub fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        Vfs::read(self, path)
    }
}

impl Vfs for SimFs {
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        let mut state = self.lock();
        let (parent, name) = state.parent(path)?;
        if state
            .dir(parent)
            .is_some_and(|dir| dir.entries.contains_key(&name))
        {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", path.display()),
            ));
        }
        let last = state.mutation()?;
        let id = state.new_node(Node::Dir(DirNode::default()));
        state.dir_op(parent, DirOp::Link(name, id));
        outcome(last)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut so_far = std::path::PathBuf::from("/");
        for name in components(path)? {
            so_far.push(name);
            if !self.is_dir(&so_far) {
                self.create_dir(&so_far)?;
            }
        }
        Ok(())
    }

    fn is_dir(&self, path: &Path) -> bool {
        let state = self.lock();
        state.lookup(path).is_ok_and(|id| state.dir(id).is_some())
    }

    fn exists(&self, path: &Path) -> bool {
        self.lock().lookup(path).is_ok()
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<Entry>> {
        let state = self.lock();
        let id = state.lookup(path)?;
        let dir = state.dir(id).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is a file", path.display()),
            )
        })?;
        Ok(dir
            .entries
            .iter()
            .map(|(name, child)| Entry {
                name: name.clone(),
                is_dir: state.dir(*child).is_some(),
            })
            .collect())
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut state = self.lock();
        let (parent, name) = state.parent(path)?;
        state.lookup(path)?;
        let last = state.mutation()?;
        state.dir_op(parent, DirOp::Unlink(name));
        outcome(last)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut state = self.lock();
        let (parent, name) = state.parent(path)?;
        let id = state.lookup(path)?;
        if state.dir(id).is_some() {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{} is a directory", path.display()),
            ));
        }
        let last = state.mutation()?;
        state.dir_op(parent, DirOp::Unlink(name));
        outcome(last)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.lock();
        let (parent, from_name) = state.parent(from)?;
        let (to_parent, to_name) = state.parent(to)?;
        let id = state.lookup(from)?;
        let last = state.mutation()?;
        if parent == to_parent {
            state.dir_op(
                parent,
                DirOp::Rename {
                    from: from_name,
                    to: to_name,
                    id,
                },
            );
        } else {
            // Across directories: a link in the target and an unlink in the source, each durable only once its own
            // directory is synced — a crash may keep either, both or neither (harsher than a journaling file
            // system, which keeps the two together; what POSIX promises without both syncs).
            state.dir_op(to_parent, DirOp::Link(to_name, id));
            state.dir_op(parent, DirOp::Unlink(from_name));
        }
        outcome(last)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut state = self.lock();
        let data = match state.nodes.get(&state.lookup(path)?) {
            Some(Node::File(file)) => Some(file.data.clone()),
            _ => None,
        };
        match data {
            Some(data) => {
                state.stats.bytes_read += data.len() as u64;
                Ok(data)
            }
            _ => Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{} is a directory", path.display()),
            )),
        }
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut state = self.lock();
        let id = state.lookup(path)?;
        let last = state.mutation()?;
        state.stats.dir_syncs += 1;
        if !state.is_broken(&BrokenSync::Directories) {
            if let Some(dir) = state.dir_mut(id) {
                dir.durable = dir.entries.clone();
                dir.pending.clear();
            }
        }
        outcome(last)
    }

    fn open(&self, path: &Path, how: OpenFor) -> io::Result<Box<dyn VfsFile>> {
        let mut state = self.lock();
        let (parent, name) = state.parent(path)?;
        let existing = state.dir(parent).and_then(|dir| dir.entries.get(&name)).copied();
        let id = match (existing, how) {
            (Some(id), _) => {
                if state.dir(id).is_some() {
                    return Err(io::Error::new(
                        io::ErrorKind::IsADirectory,
                        format!("{} is a directory", path.display()),
                    ));
                }
                if how == OpenFor::CreateEmpty {
                    let last = state.mutation()?;
                    state.file_op(id, FileOp::SetLen(0));
                    outcome(last)?;
                }
                id
            }
            (None, OpenFor::AppendOrCreate | OpenFor::CreateEmpty) => {
                let last = state.mutation()?;
                let id = state.new_node(Node::File(FileNode::default()));
                state.dir_op(parent, DirOp::Link(name.clone(), id));
                outcome(last)?;
                id
            }
            (None, _) => return Err(not_found(path)),
        };
        Ok(Box::new(SimFile {
            fs: self.clone(),
            id,
            name,
            writable: how != OpenFor::Read,
        }))
    }
}

/// A file of [`SimFs`]; it keeps its node after the name is removed, as POSIX does.
#[derive(Debug)]
struct SimFile {
    fs: SimFs,
    id: u64,
    name: String,
    writable: bool,
}

impl SimFile {
    fn write(&mut self, op: FileOp) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the file is open for reading",
            ));
        }
        let mut state = self.fs.lock();
        let last = state.mutation()?;
        state.file_op(self.id, op);
        outcome(last)
    }
}

impl VfsFile for SimFile {
    fn size(&self) -> io::Result<u64> {
        let mut state = self.fs.lock();
        Ok(state.file_mut(self.id).map_or(0, |file| file.data.len() as u64))
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut state = self.fs.lock();
        let data = state
            .file_mut(self.id)
            .map(|file| &file.data[..])
            .unwrap_or_default();
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let source = start
            .checked_add(buf.len())
            .and_then(|end| data.get(start..end))
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end"))?;
        buf.copy_from_slice(source);
        state.stats.bytes_read += buf.len() as u64;
        Ok(())
    }

    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write(FileOp::Append(bytes.to_vec()))
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.write(FileOp::SetLen(len))
    }

    fn sync(&self) -> io::Result<()> {
        let mut state = self.fs.lock();
        let last = state.mutation()?;
        state.stats.file_syncs += 1;
        if !state.file_sync_is_broken(&self.name) {
            if let Some(file) = state.file_mut(self.id) {
                file.durable = file.data.clone();
                file.pending.clear();
            }
        }
        outcome(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn write(fs: &SimFs, path: &str, bytes: &[u8]) -> Box<dyn VfsFile> {
        let mut file = fs.open(Path::new(path), OpenFor::AppendOrCreate).unwrap();
        file.append(bytes).unwrap();
        file
    }

    #[test]
    fn synced_data_in_a_synced_directory_survives_every_crash() {
        let fs = SimFs::new();
        fs.create_dir_all(Path::new("/d")).unwrap();
        fs.sync_dir(Path::new("/")).unwrap();
        let file = write(&fs, "/d/a", b"hello");
        file.sync().unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        let mut file = file;
        file.append(b" world").unwrap();
        for seed in 0..200 {
            let after = fs.crash(&mut SimRng::new(seed));
            let data = after.read(Path::new("/d/a")).unwrap();
            assert!(data.starts_with(b"hello"), "{data:?}");
            assert!(b"hello world".starts_with(&data), "{data:?}");
        }
    }

    #[test]
    fn unsynced_writes_and_entries_are_dropped_or_torn_across_seeds() {
        let fs = SimFs::new();
        fs.create_dir(Path::new("/d")).unwrap();
        fs.sync_dir(Path::new("/")).unwrap();
        let file = write(&fs, "/d/a", b"0123456789");
        drop(file);
        let (mut gone, mut torn, mut whole) = (0, 0, 0);
        for seed in 0..400 {
            match fs.crash(&mut SimRng::new(seed)).read(Path::new("/d/a")) {
                Err(_) => gone += 1,
                Ok(data) if data == b"0123456789" => whole += 1,
                Ok(data) => {
                    assert!(b"0123456789".starts_with(&data));
                    torn += 1;
                }
            }
        }
        assert!(gone > 0 && torn > 0 && whole > 0, "{gone} {torn} {whole}");
    }

    #[test]
    fn a_rename_is_atomic_and_needs_the_directory_sync() {
        let fs = SimFs::new();
        fs.create_dir(Path::new("/d")).unwrap();
        let old = write(&fs, "/d/m", b"old");
        old.sync().unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        fs.sync_dir(Path::new("/")).unwrap();
        let new = write(&fs, "/d/m.tmp", b"new");
        new.sync().unwrap();
        fs.rename(Path::new("/d/m.tmp"), Path::new("/d/m")).unwrap();
        let mut seen = BTreeMap::new();
        for seed in 0..200 {
            let data = fs.crash(&mut SimRng::new(seed)).read(Path::new("/d/m")).unwrap();
            *seen.entry(data).or_insert(0) += 1;
        }
        assert_eq!(
            seen.keys().cloned().collect::<Vec<_>>(),
            vec![b"new".to_vec(), b"old".to_vec()]
        );
        fs.sync_dir(Path::new("/d")).unwrap();
        for seed in 0..50 {
            let after = fs.crash(&mut SimRng::new(seed));
            assert_eq!(after.read(Path::new("/d/m")).unwrap(), b"new");
            assert!(!after.exists(Path::new("/d/m.tmp")));
        }
    }

    #[test]
    fn power_fails_at_the_chosen_mutation_and_stays_off() {
        let fs = SimFs::new();
        fs.power_fails_at(3);
        fs.create_dir(Path::new("/a")).unwrap();
        fs.create_dir(Path::new("/b")).unwrap();
        assert!(
            fs.create_dir(Path::new("/c")).is_err(),
            "the third takes effect and fails"
        );
        assert!(fs.exists(Path::new("/c")));
        assert!(fs.create_dir(Path::new("/e")).is_err());
        assert!(!fs.exists(Path::new("/e")));
        assert!(fs.power_failed());
        assert_eq!(fs.stats().mutations, 3);
    }

    #[test]
    fn a_broken_sync_keeps_nothing() {
        let fs = SimFs::new();
        fs.break_sync(BrokenSync::FilesEndingWith(".log".into()));
        fs.create_dir(Path::new("/d")).unwrap();
        fs.sync_dir(Path::new("/")).unwrap();
        let log = write(&fs, "/d/x.log", b"data");
        log.sync().unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        let lost = (0..100).any(|seed| {
            fs.crash(&mut SimRng::new(seed))
                .read(&PathBuf::from("/d/x.log"))
                .unwrap()
                != b"data"
        });
        assert!(lost);
    }
}
