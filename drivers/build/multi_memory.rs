//! A hostile driver written by hand: one core module with eight linear memories, whose
//! `instance-exists` grows each extra memory by 63 MiB and touches every page. Each memory alone
//! stays under a 64 MiB `--memory-limit`; together they would take 441 MiB. It is the sandbox
//! review's multi-memory attack (a Rust or C driver has one memory; a hand-made component can
//! have many), kept as a real component so the runtime tests and the RSS benchmark run it.
//!
//! The core module follows the canonical ABI by hand (world `instances-driver`); wit-component
//! wraps it into a component from the frozen `wit/released/0.2.0/` (its export names are
//! 0.2.0's, and a hand-made driver stays on the version it was written for).

use std::path::Path;

/// Pages (64 KiB) each extra memory grows by: 63 MiB.
const GROW_PAGES: u32 = 1008;

fn core_module() -> String {
    // Data layout in memory 0: strings at 1024.., info's return area at 2048, result areas at
    // 2304.., the bump heap for the host's arguments from 4096.
    let mut grow = String::new();
    for m in 1..=7 {
        grow.push_str(&format!(
            "(if (i32.eq (memory.grow {m} (i32.const {GROW_PAGES})) (i32.const -1)) (then unreachable))
             (memory.fill {m} (i32.const 0) (i32.const 165) (i32.const {bytes}))\n",
            bytes = GROW_PAGES * 65536
        ));
    }
    let extra_memories: String = (1..=7).map(|m| format!("(memory $m{m} 0)\n")).collect();
    format!(
        r#"(module
  (memory $main (export "memory") 2)
  {extra_memories}
  (global $heap (mut i32) (i32.const 4096))
  ;; name, version, scheme, one env prefix and its list element
  (data (memory $main) (i32.const 1024) "mm-bomb")
  (data (memory $main) (i32.const 1040) "0.1.0")
  (data (memory $main) (i32.const 1056) "mmbomb")
  (data (memory $main) (i32.const 1072) "MMBOMB_")
  (data (memory $main) (i32.const 1088) "\30\04\00\00\07\00\00\00")
  ;; provider-info: six (ptr, len) pairs
  (data (memory $main) (i32.const 2048)
    "\00\04\00\00\07\00\00\00" "\10\04\00\00\05\00\00\00" "\20\04\00\00\06\00\00\00"
    "\08\00\00\00\00\00\00\00" "\40\04\00\00\01\00\00\00" "\08\00\00\00\00\00\00\00")
  ;; 2304: ok(_) / ok(false); 2320: ok(true); 2336: err(not-implemented)
  (data (memory $main) (i32.const 2320) "\00\00\00\00\01")
  (data (memory $main) (i32.const 2336) "\01\00\00\00\01")
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $ptr i32) (local $end i32)
    ;; align up, bump, grow memory 0 when past its end
    (local.set $ptr (i32.and (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1)))
                             (i32.sub (i32.const 0) (local.get 2))))
    (local.set $end (i32.add (local.get $ptr) (local.get 3)))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size $main) (i32.const 65536)))
      (then (if (i32.eq (memory.grow $main
                  (i32.add (i32.shr_u (i32.sub (local.get $end) (i32.mul (memory.size $main) (i32.const 65536))) (i32.const 16)) (i32.const 1)))
                  (i32.const -1)) (then unreachable))))
    (global.set $heap (local.get $end))
    (local.get $ptr))
  (func (export "wasm-ccm:provider/provider@0.2.0#info") (result i32) (i32.const 2048))
  (func (export "wasm-ccm:provider/provider@0.2.0#init")
    (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32) (i32.const 2304))
  (func (export "wasm-ccm:provider/provider@0.2.0#housekeeping") (result i32) (i32.const 2304))
  (func (export "wasm-ccm:provider/instances@0.2.0#instance-exists")
    (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
    {grow}
    (i32.const 2320))
  (func (export "wasm-ccm:provider/instances@0.2.0#instance-shutdown")
    (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
    (i32.const 2304))
  (func (export "wasm-ccm:provider/instances@0.2.0#instance-metadata")
    (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
    (i32.const 2336))
)"#
    )
}

/// Writes the component to `out`; `workspace` holds `wit/`.
pub(crate) fn build(workspace: &Path, out: &Path) -> Result<(), String> {
    let mut module = wat::parse_str(core_module()).map_err(|e| format!("WAT: {e}"))?;
    let mut resolve = wit_parser::Resolve::default();
    let package = resolve
        .push_file(workspace.join("wit/released/0.2.0/provider.wit"))
        .map_err(|e| format!("wit/released/0.2.0/: {e:#}"))?;
    let world = resolve
        .select_world(&[package], Some("instances-driver"))
        .map_err(|e| format!("world: {e:#}"))?;
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .map_err(|e| format!("metadata: {e:#}"))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .map_err(|e| format!("module: {e:#}"))?
        .validate(true)
        .encode()
        .map_err(|e| format!("encode: {e:#}"))?;
    std::fs::write(out, component).map_err(|e| format!("{}: {e}", out.display()))
}
