//! Helpers shared by the OCI tests.

use std::io::Write as _;

/// A tar+gzip archive of `files` (path, bytes), as an Istio "compat" image layer.
pub(crate) fn tar_gzip(files: &[(&str, &[u8])]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let mut builder = tar::Builder::new(gz);
    for (path, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, path, *bytes)
            .expect("append");
    }
    let mut gz = builder.into_inner().expect("tar");
    gz.flush().expect("flush");
    gz.finish().expect("gzip")
}
