//! Stored bincode records that grew a field at their end, written so that every version
//! reads them.
//!
//! bincode stores a struct's fields by position, with no names and no lengths, so a record
//! written before a last field was added is the new layout's bytes without that field. A record
//! whose last field holds what older versions meant without it is therefore written in the
//! older layout: an older binary in the same fleet (which shares these bytes through
//! PostgreSQL) or after a roll-back still reads it, and it costs no byte more. Any other is
//! written as [`Grown::MARKER`] then the whole new layout, which older binaries refuse as
//! they refuse any record they do not know. Reading tells the two apart by the marker: each
//! type's marker is chosen so that no record of the older layout can start with it.

use std::borrow::Cow;

use heed::types::SerdeBincode;
use heed::{BoxedError, BytesDecode, BytesEncode};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A record whose last field was added after records were first stored.
pub trait Grown: Serialize {
    /// Starts the new layout's bytes; no record of the older layout starts with it.
    const MARKER: [u8; 4];
    /// The last field's bincode bytes when it holds what the older layout meant.
    const OLDER_TAIL: &'static [u8];
    /// Whether the last field holds what the older layout meant (then the record is written
    /// in that layout).
    fn fits_older(&self) -> bool;
}

/// Encodes `record` in the older layout when it fits it, else as the marker and the new one.
pub fn encode<T: Grown>(record: &T) -> Result<Vec<u8>, BoxedError> {
    let mut bytes = SerdeBincode::<T>::bytes_encode(record)?.into_owned();
    if record.fits_older() {
        debug_assert!(bytes.ends_with(T::OLDER_TAIL), "the last field is the tail");
        bytes.truncate(bytes.len() - T::OLDER_TAIL.len());
        return Ok(bytes);
    }
    let mut marked = Vec::with_capacity(T::MARKER.len() + bytes.len());
    marked.extend_from_slice(&T::MARKER);
    marked.extend_from_slice(&bytes);
    Ok(marked)
}

/// Decodes bytes of either layout.
pub fn decode<T: Grown + DeserializeOwned>(bytes: &[u8]) -> Result<T, BoxedError> {
    if let Some(new) = bytes.strip_prefix(&T::MARKER) {
        return SerdeBincode::<T>::bytes_decode(new);
    }
    let mut whole = Vec::with_capacity(bytes.len() + T::OLDER_TAIL.len());
    whole.extend_from_slice(bytes);
    whole.extend_from_slice(T::OLDER_TAIL);
    SerdeBincode::<T>::bytes_decode(&whole)
}

/// The heed codec of a [`Grown`] record, for an LMDB database of them.
pub struct GrownCodec<T>(std::marker::PhantomData<T>);

impl<'a, T: Grown + 'a> BytesEncode<'a> for GrownCodec<T> {
    type EItem = T;

    fn bytes_encode(record: &'a T) -> Result<Cow<'a, [u8]>, BoxedError> {
        encode(record).map(Cow::Owned)
    }
}

impl<'a, T: Grown + DeserializeOwned + 'static> BytesDecode<'a> for GrownCodec<T> {
    type DItem = T;

    fn bytes_decode(bytes: &'a [u8]) -> Result<T, BoxedError> {
        decode(bytes)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Serialize)]
    struct Before {
        name: String,
        size: u64,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct After {
        name: String,
        size: u64,
        weight: u32,
    }

    impl Grown for After {
        // A `Before` starts with its name's length (8 bytes): never 0xff then these.
        const MARKER: [u8; 4] = [0xff, b'T', b'S', 2];
        const OLDER_TAIL: &'static [u8] = &[1, 0, 0, 0];
        fn fits_older(&self) -> bool {
            self.weight == 1
        }
    }

    fn before() -> Vec<u8> {
        SerdeBincode::<Before>::bytes_encode(&Before {
            name: "abc".into(),
            size: 9,
        })
        .unwrap()
        .into_owned()
    }

    #[test]
    fn older_bytes_read_with_the_older_meaning_and_are_written_the_same() {
        let old = before();
        let read: After = decode(&old).unwrap();
        assert_eq!(
            read,
            After {
                name: "abc".into(),
                size: 9,
                weight: 1
            }
        );
        assert_eq!(encode(&read).unwrap(), old);
    }

    #[test]
    fn other_values_are_marked_and_round_trip() {
        let heavy = After {
            name: "abc".into(),
            size: 9,
            weight: 3,
        };
        let bytes = encode(&heavy).unwrap();
        assert_eq!(bytes[..4], After::MARKER);
        assert_eq!(decode::<After>(&bytes).unwrap(), heavy);
        // Cut short, either layout is an error, not a guess.
        assert!(decode::<After>(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode::<After>(&before()[..5]).is_err());
        assert!(decode::<After>(b"").is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_record_round_trips_and_any_bytes_decode_or_fail(
            name in ".{0,40}",
            size: u64,
            weight: u32,
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        ) {
            let record = After { name, size, weight };
            let encoded = encode(&record).unwrap();
            proptest::prop_assert_eq!(decode::<After>(&encoded).unwrap(), record);
            let _ = decode::<After>(&bytes);
            let mut marked = After::MARKER.to_vec();
            marked.extend_from_slice(&bytes);
            let _ = decode::<After>(&marked);
        }
    }
}
