//! Images that attack a decoder, built byte by byte: PNGs carrying compressed metadata chunks
//! (zlib bombs), and progressive JPEGs of many scans that are each a few bytes long.

/// A PNG chunk: length, type, data, CRC-32.
pub fn png_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut chunk = (data.len() as u32).to_be_bytes().to_vec();
    chunk.extend_from_slice(kind);
    chunk.extend_from_slice(data);
    let mut crc = !0u32;
    for &byte in &chunk[4..] {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                crc >> 1 ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    chunk.extend_from_slice(&(!crc).to_be_bytes());
    chunk
}

/// The chunks of a PNG after its signature, each whole (length to CRC), with its type.
pub fn png_chunks(png: &[u8]) -> Vec<([u8; 4], Vec<u8>)> {
    let mut chunks = Vec::new();
    let mut at = 8;
    while at + 12 <= png.len() {
        let length = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let kind: [u8; 4] = png[at + 4..at + 8].try_into().unwrap();
        chunks.push((kind, png[at..at + 12 + length].to_vec()));
        at += 12 + length;
    }
    chunks
}

/// `png` with the `extra` chunks inserted after its chunk number `after` (0: after IHDR; at
/// most before IEND).
pub fn png_with_chunks(png: &[u8], after: usize, extra: &[Vec<u8>]) -> Vec<u8> {
    let chunks = png_chunks(png);
    let mut out = png[..8].to_vec();
    for (index, (_, bytes)) in chunks.iter().enumerate() {
        out.extend_from_slice(bytes);
        if index == after.min(chunks.len() - 2) {
            extra.iter().for_each(|chunk| out.extend_from_slice(chunk));
        }
    }
    out
}

/// The zlib stream of `bytes` zeros (about a thousandth of that).
pub fn zlib_zeros(bytes: usize) -> Vec<u8> {
    miniz_oxide::deflate::compress_to_vec_zlib(&vec![0; bytes], 6)
}

/// A metadata chunk of `kind` (`iCCP`, `zTXt` or `iTXt`) whose compressed part is `stream`.
pub fn png_metadata_chunk(kind: &[u8; 4], stream: &[u8]) -> Vec<u8> {
    let head: &[u8] = match kind {
        b"iCCP" => b"icc\0\0",
        b"zTXt" => b"Comment\0\0",
        _ => b"Comment\0\x01\0\0\0",
    };
    png_chunk(kind, &[head, stream].concat())
}

/// A progressive grey JPEG of `width` x `height` whose pixels are all 128: a DC scan of
/// zero differences (a bit a block), then `ac_scans` scans of coefficients 1 to 63 coded as
/// end-of-band runs of up to 32,767 blocks, a few bytes each however large the image: what
/// makes a file of thousands of scans small.
pub fn progressive_grey_jpeg(width: u16, height: u16, ac_scans: usize) -> Vec<u8> {
    let blocks = usize::from(width.div_ceil(8)) * usize::from(height.div_ceil(8));
    // SOI; DQT of ones; SOF2 of one component.
    let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x43, 0x00];
    jpeg.extend_from_slice(&[1; 64]);
    jpeg.extend_from_slice(&[0xFF, 0xC2, 0x00, 0x0B, 0x08]);
    jpeg.extend_from_slice(&height.to_be_bytes());
    jpeg.extend_from_slice(&width.to_be_bytes());
    jpeg.extend_from_slice(&[0x01, 0x01, 0x11, 0x00]);
    // DC table 0: one code, "0", for a difference of category 0. AC table 0: EOB0 to EOB14
    // (a run of 2^r blocks plus r bits), 4-bit codes in that order, so code r is EOBr.
    jpeg.extend_from_slice(&[0xFF, 0xC4, 0x00, 0x14, 0x00, 1]);
    jpeg.extend_from_slice(&[0; 15]);
    jpeg.push(0x00);
    jpeg.extend_from_slice(&[0xFF, 0xC4, 0x00, 0x22, 0x10, 0, 0, 0, 15]);
    jpeg.extend_from_slice(&[0; 12]);
    jpeg.extend((0..15u8).map(|r| r << 4));
    jpeg.extend_from_slice(&[0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00]);
    let mut bits = Bits::default();
    (0..blocks).for_each(|_| bits.put(0, 1));
    jpeg.extend_from_slice(&bits.finish());
    for _ in 0..ac_scans {
        jpeg.extend_from_slice(&[0xFF, 0xDA, 0x00, 0x08, 0x01, 0x01, 0x00, 0x01, 0x3F, 0x00]);
        let mut bits = Bits::default();
        let mut left = blocks;
        while left > 0 {
            let run = left.min(32_767);
            let r = run.ilog2();
            bits.put(r, 4);
            bits.put((run - (1 << r)) as u32, r as u8);
            left -= run;
        }
        jpeg.extend_from_slice(&bits.finish());
    }
    jpeg.extend_from_slice(&[0xFF, 0xD9]);
    jpeg
}

/// Entropy-coded bits, most significant first, with FF bytes stuffed.
#[derive(Default)]
struct Bits {
    out: Vec<u8>,
    byte: u8,
    used: u8,
}

impl Bits {
    fn put(&mut self, value: u32, count: u8) {
        for bit in (0..count).rev() {
            self.byte = self.byte << 1 | ((value >> bit) & 1) as u8;
            self.used += 1;
            if self.used == 8 {
                self.out.push(self.byte);
                if self.byte == 0xFF {
                    self.out.push(0x00);
                }
                (self.byte, self.used) = (0, 0);
            }
        }
    }

    /// The bytes, the last one padded with ones.
    fn finish(mut self) -> Vec<u8> {
        while self.used != 0 {
            self.put(1, 1);
        }
        self.out
    }
}

/// A grey 8-bit `width` x `height` PNG of `luma` (each row unfiltered), built byte by byte.
pub fn grey_png(luma: &[u8], width: usize, height: usize) -> Vec<u8> {
    assert_eq!(luma.len(), width * height);
    let mut raw = Vec::with_capacity((width + 1) * height);
    for row in luma.chunks_exact(width) {
        raw.push(0);
        raw.extend_from_slice(row);
    }
    let mut header = (width as u32).to_be_bytes().to_vec();
    header.extend_from_slice(&(height as u32).to_be_bytes());
    header.extend_from_slice(&[8, 0, 0, 0, 0]);
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend(png_chunk(b"IHDR", &header));
    png.extend(png_chunk(
        b"IDAT",
        &miniz_oxide::deflate::compress_to_vec_zlib(&raw, 6),
    ));
    png.extend(png_chunk(b"IEND", &[]));
    png
}
