//! The file-level import graph of a crate, and its circles.
//!
//! A crate's files are found the way rustc finds them: from the root (`lib.rs`, `main.rs`)
//! through every `mod name;` to `name.rs` or `name/mod.rs` (inline `mod name { … }` blocks
//! are modules of the same file). An edge `a.rs → b.rs` means code in `a.rs` names an item of
//! `b.rs` by a path: `use crate::…`, `use super::…`, `use self::…`, a child module's name
//! (`use child::Item`, `child::f()`), a name brought in by a `use` (`use crate::x; x::f()`), or
//! any such path in code (`crate::shadow::recheck_pending(…)`). A path goes to the file of the
//! deepest module it names (`crate::a::b::Item` → `a/b.rs` when that exists, else `a.rs`).
//!
//! What does not count, and why:
//! - **Test-only code.** A file declared `#[cfg(test)] mod x;` (and everything under it, e.g.
//!   `tests.rs`), an inline `#[cfg(test)] mod tests { … }` and any other `#[cfg(test)]` item:
//!   it is not in the product build, so it cannot tie product files together, and tests
//!   naturally name everything they test.
//! - **`mod x;` itself.** Declaring a child is containment, not use. Counting it would make
//!   every folder whose children name `super::` one circle with its `mod.rs`, and merge the
//!   folder's siblings into it: the check would report folders, not circles.
//! - **Re-exports (`pub use`, `pub(crate) use`).** A re-export is the module's list of names,
//!   not a use by its code: a path through it is followed to the file that defines the item
//!   (`crate::Routing`, re-exported by `lib.rs`, goes to `routing.rs`), and the `pub use` line
//!   adds no edge. So a parent re-exporting its child while the child names `super::Item` is
//!   no circle; a parent whose own code calls into its child (a private `use child::…` or a
//!   `child::f()` path) while the child uses the parent is one.
//! - Doc comments (`[`crate::x`]` links), strings and `$crate` in macros.
//!
//! Circles are the strongly connected components of more than one file (Tarjan's algorithm).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// One edge: `from` names an item of `to`, first by the path `via`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The naming file, relative to the crate's directory.
    pub from: PathBuf,
    /// The named file.
    pub to: PathBuf,
    /// The first path that made the edge, as written (`crate::reload::DriverSlot`).
    pub via: String,
}

/// The import graph of one crate root.
#[derive(Debug, Default)]
pub struct Graph {
    /// The crate's (product) files, relative to the crate's directory.
    pub files: BTreeSet<PathBuf>,
    /// Every edge between two different files, one per ordered pair.
    pub edges: Vec<Edge>,
}

/// A circle: the files of one strongly connected component and the edges among them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circle {
    /// Its files, sorted.
    pub files: Vec<PathBuf>,
    /// The edges that close it.
    pub edges: Vec<Edge>,
}

impl std::fmt::Display for Circle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.files.iter().map(|p| p.display().to_string()).collect();
        writeln!(f, "circle of {} files: {}", names.len(), names.join(", "))?;
        for e in &self.edges {
            writeln!(
                f,
                "    {} -> {}  ({})",
                e.from.display(),
                e.to.display(),
                e.via
            )?;
        }
        Ok(())
    }
}

/// The graph of the crate whose root file is `root` (`<crate>/src/lib.rs`); paths in it are
/// relative to `crate_dir`. The error names the file that could not be read.
pub fn graph(crate_dir: &Path, root: &Path) -> Result<Graph, String> {
    let mut modules: BTreeMap<Vec<String>, Module> = BTreeMap::new();
    let mut files: Vec<FileScan> = Vec::new();
    // (file, module path of the file, directory its child files live in)
    let mut todo = vec![(root.to_path_buf(), Vec::<String>::new(), root_dir(root))];
    while let Some((file, module, dir)) = todo.pop() {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let index = files.len();
        let scan = scan(&lex(&text), &module);
        if scan.test_only {
            continue;
        }
        for (path, decl) in &scan.modules {
            let m = modules.entry(path.clone()).or_default();
            m.file = index;
            m.children
                .extend(decl.children.iter().map(|(n, _)| n.clone()));
            for (name, target) in &decl.reexports {
                m.reexports.insert(name.clone(), target.clone());
            }
            for (name, target) in &decl.aliases {
                m.aliases.insert(name.clone(), target.clone());
            }
            for (child, inline) in &decl.children {
                if *inline {
                    continue;
                }
                // Inline modules nest the directory: `mod a { mod b; }` in x.rs is x/a/b.rs.
                let mut child_dir = dir.clone();
                child_dir.extend(&path[module.len()..]);
                let flat = child_dir.join(format!("{child}.rs"));
                let nested = child_dir.join(child).join("mod.rs");
                let (child_file, grand_dir) = if flat.is_file() {
                    (flat, child_dir.join(child))
                } else if nested.is_file() {
                    (nested, child_dir.join(child))
                } else {
                    return Err(format!(
                        "{} declares `mod {child};` but neither {} nor {} exists",
                        file.display(),
                        flat.display(),
                        nested.display()
                    ));
                };
                let mut child_path = path.clone();
                child_path.push(child.clone());
                todo.push((child_file, child_path, grand_dir));
            }
        }
        files.push(FileScan {
            file: relative(crate_dir, &file),
            uses: scan.uses,
        });
    }
    let mut graph = Graph {
        files: files.iter().map(|f| f.file.clone()).collect(),
        edges: Vec::new(),
    };
    let resolver = Resolver { modules: &modules };
    let mut seen: BTreeSet<(usize, usize)> = BTreeSet::new();
    for (from, f) in files.iter().enumerate() {
        for u in &f.uses {
            let Some(abs) = resolver.absolute(&u.module, &u.segments) else {
                continue;
            };
            let to = resolver.file_of(&abs, 0);
            if to != from && seen.insert((from, to)) {
                graph.edges.push(Edge {
                    from: f.file.clone(),
                    to: files[to].file.clone(),
                    via: u.segments.join("::"),
                });
            }
        }
    }
    Ok(graph)
}

/// The circles of `graph`, each with its files sorted, in the order of their first file.
pub fn circles(graph: &Graph) -> Vec<Circle> {
    let files: Vec<&PathBuf> = graph.files.iter().collect();
    let index: HashMap<&PathBuf, usize> = files.iter().enumerate().map(|(i, f)| (*f, i)).collect();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); files.len()];
    for e in &graph.edges {
        if let (Some(&a), Some(&b)) = (index.get(&e.from), index.get(&e.to)) {
            next[a].push(b);
        }
    }
    let mut out: Vec<Circle> = tarjan(&next)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|component| {
            let members: BTreeSet<&PathBuf> = component.iter().map(|&i| files[i]).collect();
            Circle {
                files: members.iter().map(|p| (*p).clone()).collect(),
                edges: graph
                    .edges
                    .iter()
                    .filter(|e| members.contains(&e.from) && members.contains(&e.to))
                    .cloned()
                    .collect(),
            }
        })
        .collect();
    out.sort_by(|a, b| a.files.cmp(&b.files));
    out
}

/// Tarjan's strongly connected components of the graph `next` (node `i`'s successors).
/// Iterative, so a deep module graph cannot overflow the stack.
fn tarjan(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = next.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut components = Vec::new();
    let mut counter = 0;
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        // (node, position in its successor list)
        let mut work = vec![(start, 0usize)];
        while let Some(&mut (v, ref mut pos)) = work.last_mut() {
            if *pos == 0 && index[v] == usize::MAX {
                index[v] = counter;
                low[v] = counter;
                counter += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = next[v].get(*pos) {
                *pos += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}

fn root_dir(root: &Path) -> PathBuf {
    root.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn relative(base: &Path, file: &Path) -> PathBuf {
    file.strip_prefix(base).unwrap_or(file).to_path_buf()
}

/// What the crate knows of one module.
#[derive(Debug, Default)]
struct Module {
    /// Index of its file in the scan list.
    file: usize,
    children: BTreeSet<String>,
    /// `pub use` names → what they name (module-relative start, resolved late).
    reexports: HashMap<String, Start>,
    /// Every `use` name (re-exported or not) → what it names.
    aliases: HashMap<String, Start>,
}

/// A `use` leaf as written, resolved once every module is known: the module it was written in
/// and its segments.
#[derive(Debug, Clone)]
struct Start {
    module: Vec<String>,
    segments: Vec<String>,
}

struct FileScan {
    file: PathBuf,
    uses: Vec<Start>,
}

struct Resolver<'a> {
    modules: &'a BTreeMap<Vec<String>, Module>,
}

impl Resolver<'_> {
    /// The absolute path (from the crate root) that `segments`, written in `module`, names;
    /// `None` for another crate's path or a local item.
    fn absolute(&self, module: &[String], segments: &[String]) -> Option<Vec<String>> {
        self.absolute_depth(module, segments, 0)
    }

    fn absolute_depth(
        &self,
        module: &[String],
        segments: &[String],
        depth: usize,
    ) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        let mut base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => {
                let mut m = module.to_vec();
                m.pop()?;
                m
            }
            name => {
                let m = self.modules.get(module)?;
                if m.children.contains(name) {
                    let mut p = module.to_vec();
                    p.push(name.to_string());
                    p
                } else if let Some(alias) = m.aliases.get(name)
                    && depth < 16
                    // An alias of itself (`use foo;` of an external crate) names nothing here.
                    && !(alias.segments.len() == 1 && alias.module == module)
                {
                    self.absolute_depth(&alias.module, &alias.segments, depth + 1)?
                } else {
                    return None;
                }
            }
        };
        // `super::super::…` and `self::super::…`.
        let mut rest = rest;
        while let Some((s, more)) = rest.split_first() {
            if s != "super" {
                break;
            }
            base.pop()?;
            rest = more;
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file of the deepest module `abs` names, following re-exports to the defining file.
    fn file_of(&self, abs: &[String], depth: usize) -> usize {
        let mut current: Vec<String> = Vec::new();
        for (i, seg) in abs.iter().enumerate() {
            let Some(m) = self.modules.get(&current) else {
                break;
            };
            if m.children.contains(seg) {
                current.push(seg.clone());
                continue;
            }
            if let Some(target) = m.reexports.get(seg)
                && depth < 16
                && let Some(mut target_abs) =
                    self.absolute_depth(&target.module, &target.segments, depth + 1)
            {
                target_abs.extend(abs[i + 1..].iter().cloned());
                return self.file_of(&target_abs, depth + 1);
            }
            break;
        }
        while !self.modules.contains_key(&current) {
            current.pop();
        }
        self.modules[&current].file
    }
}

// ---- scanning ----

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// Rust source reduced to identifiers and punctuation: comments, strings, characters,
/// lifetimes and numbers are dropped.
fn lex(text: &str) -> Vec<Tok> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let ident_start = |ch: char| ch.is_alphabetic() || ch == '_';
    let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let ch = c[i];
        let at = |k: usize| c.get(i + k).copied().unwrap_or('\0');
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(len) = raw_string_prefix(&c[i..]) {
            // r"…", r#"…"#, br#"…"#, cr"…": no escapes, ends at `"` plus as many `#`.
            let hashes = c[i..i + len].iter().filter(|&&h| h == '#').count();
            i += len;
            while i < c.len() {
                if c[i] == '"' && (0..hashes).all(|k| c.get(i + 1 + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
        } else if ch == '"' || ((ch == 'b' || ch == 'c') && at(1) == '"') {
            i += if ch == '"' { 1 } else { 2 };
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if ch == '\'' || (ch == 'b' && at(1) == '\'') {
            if ch == 'b' {
                i += 1;
            }
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a, 'static).
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && ident_char(c[i]) {
                    i += 1;
                }
            }
        } else if ch == 'r' && at(1) == '#' && ident_start(at(2)) {
            let s = i + 2;
            i = s;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push(Tok::Ident(c[s..i].iter().collect()));
        } else if ident_start(ch) {
            let s = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            out.push(Tok::Ident(c[s..i].iter().collect()));
        } else if ch.is_ascii_digit() {
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
        } else if ch == ':' && at(1) == ':' {
            out.push(Tok::PathSep);
            i += 2;
        } else {
            out.push(Tok::Punct(ch));
            i += 1;
        }
    }
    out
}

/// The length of a raw string's opening (`r#"`, `br"`, …) at the start of `c`, if it is one.
fn raw_string_prefix(c: &[char]) -> Option<usize> {
    let mut i = 0;
    if matches!(c.first(), Some('b' | 'c')) {
        i += 1;
    }
    if c.get(i) != Some(&'r') {
        return None;
    }
    i += 1;
    while c.get(i) == Some(&'#') {
        i += 1;
    }
    (c.get(i) == Some(&'"')).then_some(i + 1)
}

/// What one module (of a file, or inline in it) declares.
#[derive(Debug, Default)]
struct ModDecl {
    /// Child modules: name, and whether inline in the same file.
    children: Vec<(String, bool)>,
    reexports: Vec<(String, Start)>,
    aliases: Vec<(String, Start)>,
}

#[derive(Debug, Default)]
struct Scan {
    /// `#![cfg(test)]`: the whole file is test-only.
    test_only: bool,
    modules: BTreeMap<Vec<String>, ModDecl>,
    /// Paths named by code and by non-`pub` `use`s.
    uses: Vec<Start>,
}

fn ident(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

/// Scans a file's tokens; `module` is the file's module path.
fn scan(toks: &[Tok], module: &[String]) -> Scan {
    let mut out = Scan::default();
    out.modules.insert(module.to_vec(), ModDecl::default());
    // One entry per open brace: the inline module it opened, if any.
    let mut braces: Vec<Option<Vec<String>>> = Vec::new();
    let current = |braces: &Vec<Option<Vec<String>>>| {
        braces
            .iter()
            .rev()
            .find_map(|b| b.clone())
            .unwrap_or_else(|| module.to_vec())
    };
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('#') => {
                let inner = toks.get(i + 1) == Some(&Tok::Punct('!'));
                let open = if inner { i + 2 } else { i + 1 };
                if toks.get(open) != Some(&Tok::Punct('[')) {
                    i += 1;
                    continue;
                }
                let close = matching(toks, open);
                let is_cfg_test = toks[open + 1..close]
                    == [
                        Tok::Ident("cfg".into()),
                        Tok::Punct('('),
                        Tok::Ident("test".into()),
                        Tok::Punct(')'),
                    ];
                i = close + 1;
                if is_cfg_test {
                    if inner && braces.is_empty() {
                        out.test_only = true;
                        return out;
                    }
                    if !inner {
                        i = skip_item(toks, i);
                    }
                }
            }
            Tok::Punct('{') => {
                braces.push(None);
                i += 1;
            }
            Tok::Punct('}') => {
                braces.pop();
                i += 1;
            }
            Tok::Ident(kw) if kw == "mod" => {
                let Some(name) = ident(toks.get(i + 1)) else {
                    i += 1;
                    continue;
                };
                let here = current(&braces);
                let inline = toks.get(i + 2) == Some(&Tok::Punct('{'));
                out.modules
                    .entry(here.clone())
                    .or_default()
                    .children
                    .push((name.to_string(), inline));
                if inline {
                    let mut path = here;
                    path.push(name.to_string());
                    out.modules.entry(path.clone()).or_default();
                    braces.push(Some(path));
                    i += 3;
                } else {
                    i += 2;
                }
            }
            Tok::Ident(kw) if kw == "use" => {
                let public = is_public(toks, i);
                let here = current(&braces);
                let mut leaves = Vec::new();
                let mut j = i + 1;
                if toks.get(j) == Some(&Tok::PathSep) {
                    // `use ::other_crate::…`: never this crate.
                    while j < toks.len() && toks[j] != Tok::Punct(';') {
                        j += 1;
                    }
                    i = j + 1;
                    continue;
                }
                use_tree(toks, &mut j, &mut Vec::new(), &mut leaves);
                // A tree this scanner does not read (`use $crate::…` in a macro) is left to
                // the path rule; the scan goes on at the first token not taken.
                let end = if toks.get(j) == Some(&Tok::Punct(';')) {
                    j + 1
                } else {
                    j.max(i + 1)
                };
                let decl = out.modules.entry(here.clone()).or_default();
                for (segments, alias) in leaves {
                    let start = Start {
                        module: here.clone(),
                        segments,
                    };
                    if let Some(alias) = alias {
                        decl.aliases.push((alias.clone(), start.clone()));
                        if public {
                            decl.reexports.push((alias, start.clone()));
                        }
                    }
                    if !public {
                        out.uses.push(start);
                    }
                }
                i = end;
            }
            Tok::Ident(first)
                if toks.get(i + 1) == Some(&Tok::PathSep)
                    && !matches!(
                        i.checked_sub(1).and_then(|p| toks.get(p)),
                        Some(Tok::PathSep | Tok::Punct('$'))
                    ) =>
            {
                let mut segments = vec![first.clone()];
                let mut j = i + 1;
                while toks.get(j) == Some(&Tok::PathSep)
                    && let Some(s) = ident(toks.get(j + 1))
                {
                    segments.push(s.to_string());
                    j += 2;
                }
                // One segment before `::<` is a generic call (`collect::<T>`), no module path.
                if segments.len() > 1 {
                    out.uses.push(Start {
                        module: current(&braces),
                        segments,
                    });
                }
                i = j;
            }
            _ => i += 1,
        }
    }
    out
}

/// Whether the `use` at `i` is a re-export: `pub use`, `pub(crate) use`, `pub(super) use`.
fn is_public(toks: &[Tok], i: usize) -> bool {
    match i.checked_sub(1).map(|p| &toks[p]) {
        Some(Tok::Ident(p)) => p == "pub",
        Some(Tok::Punct(')')) => {
            let mut k = i - 1;
            while k > 0 && toks[k] != Tok::Punct('(') {
                k -= 1;
            }
            k > 0 && toks[k - 1] == Tok::Ident("pub".into())
        }
        _ => false,
    }
}

/// Parses one use tree at `*j` (a path, `{…}` group, `*` or `as` rename) into its leaves:
/// (full path, the name it binds, if any). Stops at the `;`, `,` or `}` that ends it.
fn use_tree(
    toks: &[Tok],
    j: &mut usize,
    prefix: &mut Vec<String>,
    leaves: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let depth = prefix.len();
    loop {
        match toks.get(*j) {
            Some(Tok::Ident(s)) if s == "as" => {
                let alias = ident(toks.get(*j + 1)).map(str::to_string);
                leaves.push((prefix.clone(), alias.filter(|a| a != "_")));
                *j += 2;
                break;
            }
            Some(Tok::Ident(s)) => {
                prefix.push(s.clone());
                *j += 1;
                if toks.get(*j) == Some(&Tok::PathSep) {
                    *j += 1;
                    continue;
                }
                // A leaf, unless `as` follows.
                if ident(toks.get(*j)) == Some("as") {
                    continue;
                }
                // `self` in a group names the group's module under its own last name.
                let mut path = prefix.clone();
                if path.last().is_some_and(|l| l == "self") && path.len() > 1 {
                    path.pop();
                }
                let name = path.last().cloned();
                leaves.push((path, name));
                break;
            }
            Some(Tok::Punct('*')) => {
                leaves.push((prefix.clone(), None));
                *j += 1;
                break;
            }
            Some(Tok::Punct('{')) => {
                *j += 1;
                loop {
                    match toks.get(*j) {
                        None => break,
                        Some(Tok::Punct('}')) => {
                            *j += 1;
                            break;
                        }
                        Some(Tok::Punct(',')) => *j += 1,
                        Some(_) => {
                            let before = *j;
                            use_tree(toks, j, prefix, leaves);
                            if *j == before {
                                *j += 1;
                            }
                        }
                    }
                }
                break;
            }
            _ => break,
        }
    }
    prefix.truncate(depth);
}

/// The index of the bracket closing the one at `open` (or the last token).
fn matching(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0i32;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('[' | '(' | '{') => depth += 1,
            Tok::Punct(']' | ')' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    toks.len().saturating_sub(1)
}

/// The index just after the item starting at `i`: its `;`, its closing `}`, or (for an item
/// inside a list) before the `,` or closing bracket that ends it.
fn skip_item(toks: &[Tok], mut i: usize) -> usize {
    let mut depth = 0i32;
    while i < toks.len() {
        match &toks[i] {
            Tok::Punct('[' | '(' | '{') => depth += 1,
            Tok::Punct(']' | ')' | '}') => {
                if depth == 0 {
                    return i;
                }
                depth -= 1;
                if depth == 0 && toks[i] == Tok::Punct('}') {
                    // A block item ends at its brace, unless an expression goes on (`} else`).
                    return i + 1;
                }
            }
            Tok::Punct(';') if depth == 0 => return i + 1,
            Tok::Punct(',') if depth == 0 => return i,
            _ => {}
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `files` (path, text) under a fresh directory and returns it.
    fn fixture(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
            std::fs::write(&p, text).expect("write");
        }
        dir
    }

    fn circles_of(files: &[(&str, &str)]) -> Vec<Vec<String>> {
        let dir = fixture(files);
        let g = graph(dir.path(), &dir.path().join("src/lib.rs")).expect("a graph");
        circles(&g)
            .into_iter()
            .map(|c| c.files.iter().map(|f| f.display().to_string()).collect())
            .collect()
    }

    #[test]
    fn a_circle_through_three_files_is_found_and_named() {
        let found = circles_of(&[
            ("src/lib.rs", "mod a;\nmod b;\nmod c;\nmod leaf;\n"),
            ("src/a.rs", "use crate::b::B;\npub struct A;\n"),
            ("src/b.rs", "pub struct B(crate::c::C);\n"),
            (
                "src/c.rs",
                "use crate::leaf::L;\npub struct C;\nfn f() { let _ = super::a::A; }\n",
            ),
            ("src/leaf.rs", "pub struct L;\n"),
        ]);
        assert_eq!(found, [["src/a.rs", "src/b.rs", "src/c.rs"]]);
    }

    #[test]
    fn a_layered_crate_has_none() {
        // The same crate with c.rs no longer naming a.rs: every other kind of path still there.
        let found = circles_of(&[
            (
                "src/lib.rs",
                "mod a;\nmod b;\nmod c;\nmod leaf;\npub use a::A;\n",
            ),
            ("src/a.rs", "use crate::b::B;\npub struct A;\n"),
            ("src/b.rs", "pub struct B(crate::c::C);\n"),
            ("src/c.rs", "use crate::leaf::L;\npub struct C;\n"),
            ("src/leaf.rs", "pub struct L;\n"),
        ]);
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn groups_aliases_folders_and_child_names_are_edges() {
        // Each file reaches the next by a different kind of path; the last closes the circle.
        let found = circles_of(&[
            ("src/lib.rs", "mod a;\nmod dir;\nmod e;\n"),
            // A group with a nested path and `self`.
            (
                "src/a.rs",
                "use crate::{e::{self, E}, dir::sub::{S as T}};\n",
            ),
            // An alias used in code: `use crate::a; a::f()`.
            ("src/e.rs", "use crate::a;\nfn g() { a::f() }\n"),
            ("src/dir/mod.rs", "mod sub;\nfn h() { sub::go() }\n"),
            // super:: from a folder's child to a sibling module of the folder.
            ("src/dir/sub.rs", "pub fn go() { super::super::e::E; }\n"),
        ]);
        assert_eq!(
            found,
            [vec!["src/a.rs", "src/dir/sub.rs", "src/e.rs"]],
            "a.rs -> e.rs (group), e.rs -> a.rs (alias); a.rs -> sub.rs -> e.rs"
        );
    }

    #[test]
    fn test_code_comments_strings_and_reexports_are_no_edges() {
        let found = circles_of(&[
            (
                "src/lib.rs",
                "mod a;\nmod b;\nmod folder;\n#[cfg(test)]\nmod tests;\n",
            ),
            (
                "src/a.rs",
                "//! See [`crate::b::B`].\nuse crate::b::B;\nconst S: &str = \"crate::b::x\";\n",
            ),
            // b names a only in test code: an item, an inline module, and tests.rs.
            (
                "src/b.rs",
                "pub struct B;\n#[cfg(test)]\nuse crate::a;\n#[cfg(test)]\nmod tests { use crate::a::*; }\n/* crate::a::X */\nfn f() { let _ = r#\"crate::a\"#; let _c = '\"'; }\n",
            ),
            ("src/tests.rs", "use crate::a::*;\nuse crate::b::*;\n"),
            // A parent re-exporting its child while the child uses the parent.
            (
                "src/folder/mod.rs",
                "mod child;\npub use child::C;\npub struct P;\n",
            ),
            ("src/folder/child.rs", "use super::P;\npub struct C(P);\n"),
        ]);
        assert!(found.is_empty(), "{found:?}");
        // Positive control: the same parent calling into its child is a circle.
        let found = circles_of(&[
            ("src/lib.rs", "mod folder;\n"),
            (
                "src/folder/mod.rs",
                "mod child;\npub struct P;\nfn f() { child::make(); }\n",
            ),
            ("src/folder/child.rs", "use super::P;\npub fn make() {}\n"),
        ]);
        assert_eq!(found, [["src/folder/child.rs", "src/folder/mod.rs"]]);
        // And b naming a outside test code closes the circle above.
        let found = circles_of(&[
            ("src/lib.rs", "mod a;\nmod b;\n"),
            ("src/a.rs", "use crate::b::B;\n"),
            ("src/b.rs", "pub struct B;\nuse crate::a;\n"),
        ]);
        assert_eq!(found, [["src/a.rs", "src/b.rs"]]);
    }

    #[test]
    fn a_path_through_a_reexport_reaches_the_defining_file() {
        // c.rs names `crate::A` (lib.rs re-exports it from a.rs), and a.rs names c.rs.
        let found = circles_of(&[
            ("src/lib.rs", "mod a;\nmod c;\npub use a::A;\n"),
            ("src/a.rs", "pub struct A(crate::c::C);\n"),
            ("src/c.rs", "pub struct C;\nfn f(_: crate::A) {}\n"),
        ]);
        assert_eq!(found, [["src/a.rs", "src/c.rs"]]);
    }

    #[test]
    fn the_report_names_every_edge_of_the_circle() {
        let dir = fixture(&[
            ("src/lib.rs", "mod a;\nmod b;\n"),
            ("src/a.rs", "use crate::b::B;\n"),
            ("src/b.rs", "fn f() { crate::a::go(); }\n"),
        ]);
        let g = graph(dir.path(), &dir.path().join("src/lib.rs")).expect("a graph");
        let shown = circles(&g)[0].to_string();
        assert!(
            shown.contains("circle of 2 files: src/a.rs, src/b.rs"),
            "{shown}"
        );
        assert!(
            shown.contains("src/a.rs -> src/b.rs  (crate::b::B)"),
            "{shown}"
        );
        assert!(
            shown.contains("src/b.rs -> src/a.rs  (crate::a::go)"),
            "{shown}"
        );
    }

    #[test]
    fn a_missing_module_file_is_an_error_naming_both_paths() {
        let dir = fixture(&[("src/lib.rs", "mod gone;\n")]);
        let err = graph(dir.path(), &dir.path().join("src/lib.rs")).unwrap_err();
        assert!(
            err.contains("mod gone;") && err.contains("gone/mod.rs"),
            "{err}"
        );
    }

    #[test]
    fn tarjan_finds_components() {
        // 0 -> 1 -> 2 -> 0, 2 -> 3, 3 -> 4 -> 3, 5 alone.
        let next = vec![vec![1], vec![2], vec![0, 3], vec![4], vec![3], vec![]];
        let mut comps: Vec<Vec<usize>> = tarjan(&next)
            .into_iter()
            .map(|mut c| {
                c.sort();
                c
            })
            .collect();
        comps.sort();
        assert_eq!(comps, [vec![0, 1, 2], vec![3, 4], vec![5]]);
    }
}
