//! Gives functions of a driver component the names an unstripped build would carry. The guest
//! profile builds every test driver with `strip = true` (no name section), so the backtrace tests
//! add one naming the functions they need; a name section is the driver's own text either way,
//! which is exactly what the host must treat as hostile. Shared by the runtime's and
//! `wasm-ccm-dev`'s tests (`#[path]`), so it needs no dependency.
#![allow(dead_code)]

/// `component` with its largest core module's `name` section replaced by one naming each
/// `(function index, name)` of `names` (the largest module is the driver's code; the others are
/// `wit-component`'s glue).
pub(crate) fn with_function_names(component: &[u8], names: &[(u32, &str)]) -> Vec<u8> {
    let (header, sections) = split(component);
    let main = sections
        .iter()
        .enumerate()
        .filter(|(_, (id, _))| *id == CORE_MODULE_SECTION)
        .max_by_key(|(_, (_, body))| body.len())
        .map(|(i, _)| i)
        .expect("the component has a core module");
    let mut out = header.to_vec();
    for (i, (id, body)) in sections.iter().enumerate() {
        let renamed;
        let body: &[u8] = if i == main {
            renamed = renamed_module(body, names);
            &renamed
        } else {
            body
        };
        out.push(*id);
        leb(&mut out, body.len() as u32);
        out.extend_from_slice(body);
    }
    out
}

/// A component's section holding a core module.
const CORE_MODULE_SECTION: u8 = 1;

/// The 8-byte preamble and every `(section id, body)` of a module or component.
fn split(wasm: &[u8]) -> (&[u8], Vec<(u8, &[u8])>) {
    let (header, mut rest) = wasm.split_at(8);
    let mut sections = Vec::new();
    while let Some((&id, after)) = rest.split_first() {
        let (size, after) = read_leb(after);
        let (body, after) = after.split_at(size as usize);
        sections.push((id, body));
        rest = after;
    }
    (header, sections)
}

/// `module` without its `name` custom section, with one naming `names` appended.
fn renamed_module(module: &[u8], names: &[(u32, &str)]) -> Vec<u8> {
    let (header, sections) = split(module);
    let mut out = header.to_vec();
    for (id, body) in sections {
        if id == 0 && custom_name(body) == b"name" {
            continue;
        }
        out.push(id);
        leb(&mut out, body.len() as u32);
        out.extend_from_slice(body);
    }
    let mut sorted = names.to_vec();
    sorted.sort_by_key(|(index, _)| *index);
    let mut map = Vec::new();
    leb(&mut map, sorted.len() as u32);
    for (index, name) in sorted {
        leb(&mut map, index);
        leb(&mut map, name.len() as u32);
        map.extend_from_slice(name.as_bytes());
    }
    let mut section = Vec::new();
    leb(&mut section, 4);
    section.extend_from_slice(b"name");
    // Subsection 1: function names.
    section.push(1);
    leb(&mut section, map.len() as u32);
    section.extend_from_slice(&map);
    out.push(0);
    leb(&mut out, section.len() as u32);
    out.extend_from_slice(&section);
    out
}

fn custom_name(body: &[u8]) -> &[u8] {
    let (len, rest) = read_leb(body);
    &rest[..len as usize]
}

fn read_leb(bytes: &[u8]) -> (u32, &[u8]) {
    let mut value = 0u32;
    for (i, b) in bytes.iter().enumerate() {
        value |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return (value, &bytes[i + 1..]);
        }
    }
    panic!("truncated LEB128")
}

fn leb(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}
