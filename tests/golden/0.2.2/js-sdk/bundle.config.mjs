// `jco componentize --bundle` (Rolldown) treats only `wasi:` imports as external; a driver's
// WIT imports (`wasm-ccm:provider/…`) are provided by the component too.
export default { external: [/^wasm-ccm:/] };
