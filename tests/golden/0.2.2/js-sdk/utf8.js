// UTF-8 without TextEncoder/TextDecoder, which the QuickJS backend (componentize-qjs) lacks.
export function encodeUtf8(s) {
  if (typeof TextEncoder !== 'undefined') return new TextEncoder().encode(s);
  const out = [];
  for (const ch of s) {
    let c = ch.codePointAt(0);
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return new Uint8Array(out);
}

/** Decodes UTF-8; `fatal` throws on invalid input, else U+FFFD replaces it. */
export function decodeUtf8(bytes, fatal = false) {
  if (typeof TextDecoder !== 'undefined') return new TextDecoder('utf-8', { fatal }).decode(bytes);
  let s = '';
  for (let i = 0; i < bytes.length;) {
    const b = bytes[i];
    let n = b < 0x80 ? 0 : b >= 0xf0 && b < 0xf8 ? 3 : b >= 0xe0 ? 2 : b >= 0xc0 ? 1 : -1;
    let c = n === 0 ? b : n === 1 ? b & 31 : n === 2 ? b & 15 : b & 7;
    let ok = n >= 0;
    for (let k = 1; ok && k <= n; k++) {
      const x = bytes[i + k];
      if (x === undefined || (x & 0xc0) !== 0x80) ok = false; else c = (c << 6) | (x & 63);
    }
    if (!ok) {
      if (fatal) throw new TypeError(`invalid UTF-8 at byte ${i}`);
      s += '\ufffd'; i += 1; continue;
    }
    s += String.fromCodePoint(c); i += n + 1;
  }
  return s;
}
