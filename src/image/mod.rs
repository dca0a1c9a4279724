//! Images before the models: recognise ([`probe`]), decode ([`decode`]), and shape each
//! model's input tensor ([`resize`], [`jpeg`]).
//!
//! The shard only probes (format and dimensions from the header, microseconds), so that a
//! refusal (415, 413, 400) costs nothing; decoding and resizing run on the shard's model
//! worker with the inference, never on the reactor.
//!
//! Limits ([`crate::bounds`]): [`crate::bounds::IMAGE_BYTES_MAX`] of encoded bytes,
//! [`crate::bounds::IMAGE_SIDE_PX_MAX`] pixels on a side, and the plan's pixel count (50 MP, or
//! 12 MP on the free plan), all checked against the header before any pixel exists.

pub mod area;
pub mod decode;
pub mod faces;
pub mod hashes;
pub mod jpeg;
mod measured;
pub mod ocr;
pub mod probe;
pub mod properties;
pub mod qr;
mod raster;
pub mod resize;
pub mod tensor;

pub use measured::{Measured, Measures};
pub use raster::{fraction, Format, ImageError, Rgb8, FRACTION_DECIMALS};
