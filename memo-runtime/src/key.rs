//! Content keys: a canonical MessagePack encoding of a value, streamed into
//! SHA-256 (the derivation is documented on [`content_key`]).

use std::io::Write;
use std::ops::Range;

use serde::ser::{self, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// The domain tag hashed before every encoding, so a content key can never
/// equal a digest of the same bytes made for another purpose.
const DOMAIN: &[u8] = b"memo.content-key.v1\0";

/// The MessagePack extension type of [`some_nil`](Canonical::some_nil): a
/// `Some` around a value that encodes as nil.
const SOME_NIL_EXT: i8 = 0x53;

/// Derives the content key of `input`: hex SHA-256 over a domain tag and the
/// canonical MessagePack encoding of `input`.
///
/// # The derivation (version 1)
///
/// `content_key(input)` is the lower-case hex SHA-256 of
/// `b"memo.content-key.v1\0"` followed by the canonical MessagePack encoding
/// of `input`. The encoding is written straight into the hasher; only map
/// entries are buffered, because they must be sorted before they are written.
///
/// The canonical encoding follows serde's data model:
///
/// | serde | MessagePack |
/// |---|---|
/// | `bool` | bool |
/// | integers (8 to 64 bits) | the shortest int form of the value, so `5u8` and `5i64` agree |
/// | `f32`, `f64` | float 32, float 64, bit for bit; every NaN as the one quiet NaN of its width (`0x7fc00000`, `0x7ff8000000000000`) |
/// | `char`, `str` | str |
/// | bytes (`serde_bytes`) | bin |
/// | `None`, `()`, unit struct | nil |
/// | `Some(v)`, newtype struct | `v` itself, except as below |
/// | `Some(v)` where `v` encodes as nil (`Some(())`, `Some(None)`), through any newtypes | ext 4 of type `0x53`: the number of such `Some`s, a big-endian `u32` |
/// | sequence, tuple, tuple struct | array |
/// | struct | map of field name (str) to value, in **declaration order** |
/// | map | map with entries **sorted by the encoded bytes of their keys** (then of their values), at every depth |
/// | unit variant | str: the variant name |
/// | newtype / tuple / struct variant | map of one entry: variant name to the value / array / map of fields |
///
/// Sorting map entries makes a `HashMap`'s iteration order irrelevant: two
/// maps with equal content give one key. A `HashSet` serializes as a
/// sequence, whose order is random; do not use one in a key (use a
/// `BTreeSet`). 128-bit integers are refused.
///
/// # Floats and options
///
/// A key must differ wherever a function could compute a different value,
/// and should agree wherever it cannot:
///
/// - `0.0` and `-0.0` are **different** keys: they compare equal, but a
///   function can tell them apart (`1.0 / x`, `x.signum()`, `format!`).
/// - **Every NaN gives one key** per width: Rust does not promise which NaN
///   bit pattern an operation returns (it differs between platforms), so a
///   retry on another machine must not miss because of it.
/// - `1.5f32` and `1.5f64` are **different** keys: float width is part of
///   the input, as the type of a parameter is (integers, whose value is
///   exact at any width, agree). Changing a parameter from `f32` to `f64`
///   changes its keys: the next call misses.
/// - `Some(v)` is `v` itself, so `Some(5)` and `5` agree, but `Some(())`
///   (or `Some(None)`, or a unit struct in a `Some`) would then be `None`:
///   such a `Some` is encoded as a marker that counts the nested `Some`s, so
///   `None`, `Some(None)` and `Some(Some(None))` are three keys.
///
/// Golden vectors in this module's tests pin the derivation: changing it is a
/// change of stored data format, because committed entries would no longer be
/// found.
///
/// # Errors
///
/// [`Error::Serialization`] if `input`'s `Serialize` impl fails or uses a
/// type the canonical encoding refuses (128-bit integers).
///
/// # Example
///
/// ```
/// use std::collections::HashMap;
/// use memo_runtime::content_key;
///
/// let a: HashMap<&str, u32> = [("x", 1), ("y", 2)].into();
/// let b: HashMap<&str, u32> = [("y", 2), ("x", 1)].into();
/// assert_eq!(content_key(&a)?, content_key(&b)?);
/// assert_eq!(content_key("hello")?.len(), 64);
/// # Ok::<(), memo_runtime::Error>(())
/// ```
pub fn content_key<T: Serialize + ?Sized>(input: &T) -> Result<String> {
    let mut key = KeyHasher::new();
    key.value(input)?;
    Ok(key.finish())
}

/// A content key written piece by piece: the domain tag, then canonical
/// values and array headers as they come, so a caller can key a sequence
/// of differently typed values (`#[memoized]`'s arguments) without erasing
/// their types or collecting them first. Writing `array(n)` and then `n`
/// values gives the key of the `n`-tuple of those values.
pub(crate) struct KeyHasher(HashWriter);

impl KeyHasher {
    pub(crate) fn new() -> KeyHasher {
        let mut hasher = HashWriter(Sha256::new());
        hasher.0.update(DOMAIN);
        KeyHasher(hasher)
    }

    /// Writes the header of an array of `len` values.
    pub(crate) fn array(&mut self, len: usize) -> Result<()> {
        let header = len32(len).and_then(|len| Ok(rmp::encode::write_array_len(&mut self.0, len)?));
        header.map(drop).map_err(serialization_error)
    }

    /// Writes the canonical encoding of `value`.
    pub(crate) fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value
            .serialize(&mut Canonical::new(&mut self.0))
            .map_err(serialization_error)
    }

    /// The key: lower-case hex SHA-256 of everything written.
    pub(crate) fn finish(self) -> String {
        self.finish_digest().as_str().to_owned()
    }

    /// [`finish`](Self::finish), on the stack.
    pub(crate) fn finish_digest(self) -> HexDigest {
        HexDigest::of(&self.0.0.finalize())
    }
}

/// A SHA-256 digest as 64 lower-case hex digits, held on the stack so a
/// key that is only looked up costs no allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HexDigest([u8; 64]);

impl HexDigest {
    fn of(digest: &[u8]) -> HexDigest {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut hex = [0; 64];
        for (pair, b) in hex.chunks_exact_mut(2).zip(digest) {
            pair[0] = DIGITS[usize::from(b >> 4)];
            pair[1] = DIGITS[usize::from(b & 0xf)];
        }
        HexDigest(hex)
    }

    /// The digits.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex digits are ASCII")
    }
}

impl std::fmt::Debug for HexDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn serialization_error(e: KeyError) -> Error {
    Error::serialization("content key input", e)
}

/// Hex SHA-256 of `bytes` (tests and `testing` pin paths with it; the runtime uses
/// [`sha256_digest`], which stays on the stack).
#[cfg(any(test, feature = "testing"))]
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    sha256_digest(bytes).as_str().to_owned()
}

/// [`sha256_hex`], on the stack.
pub(crate) fn sha256_digest(bytes: &[u8]) -> HexDigest {
    HexDigest::of(&Sha256::digest(bytes))
}

struct HashWriter(Sha256);

impl Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The encoder's error: a message, the source of [`Error::Serialization`].
#[derive(Debug)]
struct KeyError(String);

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KeyError {}

impl ser::Error for KeyError {
    fn custom<M: std::fmt::Display>(msg: M) -> Self {
        KeyError(msg.to_string())
    }
}

impl From<rmp::encode::ValueWriteError<std::io::Error>> for KeyError {
    fn from(e: rmp::encode::ValueWriteError<std::io::Error>) -> Self {
        KeyError(e.to_string())
    }
}

impl From<std::io::Error> for KeyError {
    fn from(e: std::io::Error) -> Self {
        KeyError(e.to_string())
    }
}

type KResult<T = ()> = std::result::Result<T, KeyError>;

fn len32(len: usize) -> KResult<u32> {
    u32::try_from(len).map_err(|_| KeyError(format!("length {len} exceeds MessagePack's u32")))
}

/// The canonical MessagePack serializer, writing into `out`.
struct Canonical<'w, W: Write> {
    out: &'w mut W,
    /// `Some`s entered since the last value was written: if the next value
    /// is nil, they are written as a [`some_nil`](Self::some_nil) marker.
    pending_some: u32,
}

impl<'w, W: Write> Canonical<'w, W> {
    fn new(out: &'w mut W) -> Self {
        Canonical {
            out,
            pending_some: 0,
        }
    }

    /// Starts a value that is not nil: `Some`s around it encode as nothing.
    fn plain(&mut self) -> &mut Self {
        self.pending_some = 0;
        self
    }

    /// Writes nil, or the marker of the `Some`s around it.
    fn nil(&mut self) -> KResult {
        match std::mem::take(&mut self.pending_some) {
            0 => rmp::encode::write_nil(self.out)?,
            depth => self.some_nil(depth)?,
        }
        Ok(())
    }

    /// `depth` nested `Some`s around a nil: an extension value no other
    /// input encodes as.
    fn some_nil(&mut self, depth: u32) -> KResult {
        rmp::encode::write_ext_meta(self.out, 4, SOME_NIL_EXT)?;
        self.out.write_all(&depth.to_be_bytes())?;
        Ok(())
    }

    fn int(&mut self, v: i64) -> KResult {
        self.plain();
        if v >= 0 {
            rmp::encode::write_uint(self.out, v as u64)?;
        } else {
            rmp::encode::write_sint(self.out, v)?;
        }
        Ok(())
    }

    fn one_entry_map(&mut self, variant: &str) -> KResult {
        self.plain();
        rmp::encode::write_map_len(self.out, 1)?;
        rmp::encode::write_str(self.out, variant)?;
        Ok(())
    }
}

impl<'a, 'w, W: Write> ser::Serializer for &'a mut Canonical<'w, W> {
    type Ok = ();
    type Error = KeyError;
    type SerializeSeq = Seq<'a, 'w, W>;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Map<'a, 'w, W>;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn serialize_bool(self, v: bool) -> KResult {
        Ok(rmp::encode::write_bool(self.plain().out, v)?)
    }
    fn serialize_i8(self, v: i8) -> KResult {
        self.int(v.into())
    }
    fn serialize_i16(self, v: i16) -> KResult {
        self.int(v.into())
    }
    fn serialize_i32(self, v: i32) -> KResult {
        self.int(v.into())
    }
    fn serialize_i64(self, v: i64) -> KResult {
        self.int(v)
    }
    fn serialize_u8(self, v: u8) -> KResult {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> KResult {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> KResult {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> KResult {
        rmp::encode::write_uint(self.plain().out, v)?;
        Ok(())
    }
    fn serialize_i128(self, _: i128) -> KResult {
        Err(KeyError(
            "128-bit integers are not supported in content keys".into(),
        ))
    }
    fn serialize_u128(self, _: u128) -> KResult {
        Err(KeyError(
            "128-bit integers are not supported in content keys".into(),
        ))
    }
    fn serialize_f32(self, v: f32) -> KResult {
        let v = if v.is_nan() { f32::NAN } else { v };
        Ok(rmp::encode::write_f32(self.plain().out, v)?)
    }
    fn serialize_f64(self, v: f64) -> KResult {
        let v = if v.is_nan() { f64::NAN } else { v };
        Ok(rmp::encode::write_f64(self.plain().out, v)?)
    }
    fn serialize_char(self, v: char) -> KResult {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> KResult {
        Ok(rmp::encode::write_str(self.plain().out, v)?)
    }
    fn serialize_bytes(self, v: &[u8]) -> KResult {
        Ok(rmp::encode::write_bin(self.plain().out, v)?)
    }
    fn serialize_none(self) -> KResult {
        self.nil()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> KResult {
        self.pending_some = self
            .pending_some
            .checked_add(1)
            .ok_or_else(|| KeyError("options nested too deep".into()))?;
        value.serialize(self)
    }
    fn serialize_unit(self) -> KResult {
        self.nil()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> KResult {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _i: u32,
        variant: &'static str,
    ) -> KResult {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> KResult {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _i: u32,
        variant: &'static str,
        value: &T,
    ) -> KResult {
        self.one_entry_map(variant)?;
        value.serialize(self)
    }
    fn serialize_seq(self, len: Option<usize>) -> KResult<Self::SerializeSeq> {
        self.plain();
        Ok(match len {
            Some(len) => {
                rmp::encode::write_array_len(self.out, len32(len)?)?;
                Seq::Direct(self)
            }
            // The array header needs the length first: count into a buffer.
            None => Seq::Buffered {
                parent: self,
                buf: Vec::new(),
                count: 0,
            },
        })
    }
    fn serialize_tuple(self, len: usize) -> KResult<Self> {
        rmp::encode::write_array_len(self.plain().out, len32(len)?)?;
        Ok(self)
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> KResult<Self> {
        self.serialize_tuple(len)
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _i: u32,
        variant: &'static str,
        len: usize,
    ) -> KResult<Self> {
        self.one_entry_map(variant)?;
        self.serialize_tuple(len)
    }
    fn serialize_map(self, _len: Option<usize>) -> KResult<Self::SerializeMap> {
        self.plain();
        Ok(Map {
            parent: self,
            buf: Vec::new(),
            entries: Vec::new(),
            key: None,
        })
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> KResult<Self> {
        rmp::encode::write_map_len(self.plain().out, len32(len)?)?;
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        _i: u32,
        variant: &'static str,
        len: usize,
    ) -> KResult<Self> {
        self.one_entry_map(variant)?;
        self.serialize_struct(name, len)
    }
}

/// A sequence: written directly when its length is known up front.
enum Seq<'a, 'w, W: Write> {
    Direct(&'a mut Canonical<'w, W>),
    Buffered {
        parent: &'a mut Canonical<'w, W>,
        buf: Vec<u8>,
        count: usize,
    },
}

impl<W: Write> ser::SerializeSeq for Seq<'_, '_, W> {
    type Ok = ();
    type Error = KeyError;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> KResult {
        match self {
            Seq::Direct(c) => value.serialize(&mut **c),
            Seq::Buffered { buf, count, .. } => {
                *count += 1;
                value.serialize(&mut Canonical::new(buf))
            }
        }
    }

    fn end(self) -> KResult {
        if let Seq::Buffered { parent, buf, count } = self {
            rmp::encode::write_array_len(parent.out, len32(count)?)?;
            parent.out.write_all(&buf)?;
        }
        Ok(())
    }
}

/// A map: entries are encoded one after another into one scratch buffer,
/// then written in the order of their encoded keys.
struct Map<'a, 'w, W: Write> {
    parent: &'a mut Canonical<'w, W>,
    buf: Vec<u8>,
    /// Each entry's key and value, as ranges of `buf`.
    entries: Vec<(Range<usize>, Range<usize>)>,
    key: Option<Range<usize>>,
}

impl<W: Write> Map<'_, '_, W> {
    fn encode<T: Serialize + ?Sized>(&mut self, value: &T) -> KResult<Range<usize>> {
        let start = self.buf.len();
        value.serialize(&mut Canonical::new(&mut self.buf))?;
        Ok(start..self.buf.len())
    }
}

impl<W: Write> ser::SerializeMap for Map<'_, '_, W> {
    type Ok = ();
    type Error = KeyError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> KResult {
        self.key = Some(self.encode(key)?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> KResult {
        let key = self
            .key
            .take()
            .ok_or_else(|| KeyError("map value serialized before its key".into()))?;
        let value = self.encode(value)?;
        self.entries.push((key, value));
        Ok(())
    }

    fn end(mut self) -> KResult {
        let buf = &self.buf;
        self.entries.sort_unstable_by(|(k1, v1), (k2, v2)| {
            (&buf[k1.clone()], &buf[v1.clone()]).cmp(&(&buf[k2.clone()], &buf[v2.clone()]))
        });
        rmp::encode::write_map_len(self.parent.out, len32(self.entries.len())?)?;
        for (k, v) in &self.entries {
            self.parent.out.write_all(&buf[k.clone()])?;
            self.parent.out.write_all(&buf[v.clone()])?;
        }
        Ok(())
    }
}

macro_rules! compound {
    ($trait:ident, $method:ident) => {
        impl<W: Write> ser::$trait for &mut Canonical<'_, W> {
            type Ok = ();
            type Error = KeyError;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> KResult {
                value.serialize(&mut **self)
            }

            fn end(self) -> KResult {
                Ok(())
            }
        }
    };
}

compound!(SerializeTuple, serialize_element);
compound!(SerializeTupleStruct, serialize_field);
compound!(SerializeTupleVariant, serialize_field);

macro_rules! fields {
    ($trait:ident) => {
        impl<W: Write> ser::$trait for &mut Canonical<'_, W> {
            type Ok = ();
            type Error = KeyError;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> KResult {
                rmp::encode::write_str(self.out, key)?;
                value.serialize(&mut **self)
            }

            fn end(self) -> KResult {
                Ok(())
            }
        }
    };
}

fields!(SerializeStruct);
fields!(SerializeStructVariant);

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Serialize;

    use super::*;

    // Golden vectors: each expected digest was computed independently with
    // Python's `msgpack` (`packb(obj, use_bin_type=True)`) and `hashlib`,
    // over the domain tag and the encoding the module docs specify; those of
    // floats and options by packing the documented bytes by hand
    // (`struct.pack`), e.g. `b"\xd6\x53" + struct.pack(">I", 1)` for `Some(())`.
    #[derive(Serialize)]
    struct Inner {
        tag: &'static str,
        tags: Vec<&'static str>,
    }

    #[derive(Serialize)]
    struct Outer {
        id: u32,
        inner: Inner,
    }

    #[derive(Serialize)]
    enum Shape {
        Red,
        Rgb(u8, u8, u8),
        Point { x: i32, y: i32 },
    }

    #[derive(Serialize)]
    struct Bytes<'a>(#[serde(with = "serde_bytes_shim")] &'a [u8]);

    mod serde_bytes_shim {
        pub(super) fn serialize<S: serde::Serializer>(v: &&[u8], s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(v)
        }
    }

    fn key<T: Serialize + ?Sized>(v: &T) -> String {
        content_key(v).unwrap()
    }

    #[test]
    fn golden_vectors_pin_the_derivation() {
        let cases: Vec<(&str, String, &str)> = vec![
            (
                "unit",
                key(&()),
                "c5d8cbf001cba7f60cacb112be17dd43c0b4ec87beed6a1acaf5dbaffa0b122f",
            ),
            (
                "empty seq",
                key(&Vec::<u8>::new()),
                "72a88c0023ddcce74deb2848cec4a9b2950c2e8311cfe3193711c0dbdbb59322",
            ),
            (
                "str",
                key("hello"),
                "b3b13ede503879a7e9e7eb4637e2128a9eae8cda7620c6aea46465f6ee38eaad",
            ),
            (
                "empty str",
                key(""),
                "888374b5bbb57d21219d43a127f01796df499a10b57e83b1e00e9bb877a01178",
            ),
            (
                "zero",
                key(&0u64),
                "9d7566e6e1c18f81776ce2aac4b4e463d8188c7f0e53cc2d79e1340874478f6f",
            ),
            (
                "minus one",
                key(&-1i64),
                "c70f2af1cd76a7cf8cc8cf4f8ceaf0139543b23d921cc5adc7868f02f687b5bf",
            ),
            (
                "u64 max",
                key(&u64::MAX),
                "6dcd9c7a95cafaa999a94dcf8e83bc53452960ecf0bc6eba25ccc738cf72bb67",
            ),
            (
                "i64 min",
                key(&i64::MIN),
                "ab840f401e1d0cb29eb775c9762ff5fb88fde88e6054eba172b34a8d0de6afe0",
            ),
            (
                "bytes",
                key(&Bytes(&[1, 2, 3])),
                "945300b1c078ec8026ea9e6f00f9f1e80b77a4a2b3e6eaa8783d6487b651ad9a",
            ),
            (
                "bool",
                key(&true),
                "45b70f75e0342dba2c147855e86f9098c5b61add22217dc80ef67afa194e0137",
            ),
            (
                "f64",
                key(&1.5f64),
                "1857dfd091a6f8e54be099c677b771dfd025c7e60c38abcaf8fbe548b0822118",
            ),
            (
                "f32",
                key(&1.5f32),
                "a2a303c000c01d1d1a21b1350ffd5a6e224a85746e86f91e35aefc35646bbc64",
            ),
            (
                "f64 negative zero",
                key(&-0.0f64),
                "56764502b4b50c91ebd94dca7b6cfe005f7e43e2f8655c07489fe4c50f68ff9a",
            ),
            (
                "f64 zero",
                key(&0.0f64),
                "b1e2c56a4ec86f81c57eb7a185cda2219a9599a64603a6073f5ffd147ead43de",
            ),
            (
                "f64 NaN with a payload: the quiet NaN",
                key(&f64::from_bits(0xfff8_0000_0000_0001)),
                "bacfe5cedaa94cca98c3476cd23a554785aa6a7f36d0b1ac3a390cca86ab4a2a",
            ),
            (
                "f32 NaN with a payload: the quiet NaN",
                key(&f32::from_bits(0xffc0_0001)),
                "5439e4bae4bfd433bb38f723adf78dacd3a4c5bc0a7b20fd4383f7b4d2d97eb9",
            ),
            (
                "some unit",
                key(&Some(())),
                "333b975c73b5e0847afb43c9fc8ccb8606af54f5e41cb8d53033a30fdfcaaf8b",
            ),
            (
                "some some none",
                key(&Some(Some(None::<u8>))),
                "1790c4ee6cf78949dd304fdff6a73ae7aef48d3beacf63108f1460e674265592",
            ),
            (
                "some unit, none and some value in a tuple",
                key(&(Some(()), None::<u8>, Some(5u8))),
                "bc4baefc1232cfde71ba190bcc4a87c76a6a0d633a81bbdb15409b1668b231e9",
            ),
            (
                "none",
                key(&None::<u8>),
                "c5d8cbf001cba7f60cacb112be17dd43c0b4ec87beed6a1acaf5dbaffa0b122f",
            ),
            (
                "some",
                key(&Some(7u8)),
                "9d453ac65b3582405075e93f04ad6f984044db92878ba0602fa2f5f9b1ef64c5",
            ),
            (
                "tuple",
                key(&("draft", 2u32, "ticket-1", 42i32)),
                "ff987b7f8151cc6b6d548104b8a8ba5e6f7621039677b5b05270ea46bb4b41c6",
            ),
            (
                "nested struct",
                key(&Outer {
                    id: 7,
                    inner: Inner {
                        tag: "x",
                        tags: vec!["a", "b"],
                    },
                }),
                "827447ae4981bbfd9f51883584ed976eba626d17db4da877cfe5593075b10d0a",
            ),
            (
                "unit variant",
                key(&Shape::Red),
                "d1208b04110afdb97acf145bf1771433bc80661868edeafff4e31f31f98257ab",
            ),
            (
                "tuple variant",
                key(&Shape::Rgb(1, 2, 3)),
                "4a1323646bf7f937b82f4392a765ad4dd41927f01449579098e1b02babc50165",
            ),
            (
                "struct variant",
                key(&Shape::Point { x: 1, y: -2 }),
                "e92b616c1aefeb4d1f6bf2700adbf3dbf80a5456bd3fe172d79f2da66473fc04",
            ),
            (
                "map",
                key(&HashMap::from([("b", 2u8), ("a", 1)])),
                "29453ee3542a290b9cb294c2f6726c9d741d03367ce6b08977fad158bc13af85",
            ),
            (
                "map sorted by encoded key, length prefix first",
                key(&BTreeMap::from([("aa", 2u8), ("b", 1)])),
                "c343878fb0b26d3d55ab51c0dd16b7d70e38d11a7a12db0de2279ed7bd84d0fc",
            ),
            (
                "nested map",
                key(&HashMap::from([(
                    "k",
                    HashMap::from([("b", false), ("a", true)]),
                )])),
                "dd8291c93ab4e430be41b61d76bddb60e29dd4452cc49ca3c9ca9eb1dfb011be",
            ),
        ];
        for (name, got, want) in cases {
            assert_eq!(got, want, "golden vector {name:?}");
        }
    }

    #[test]
    fn hashmap_order_never_changes_a_key() {
        let pairs: Vec<(String, u32)> = (0..200).map(|i| (format!("k{i}"), i)).collect();
        let forward: HashMap<_, _> = pairs.iter().cloned().collect();
        let backward: HashMap<_, _> = pairs.iter().rev().cloned().collect();
        let btree: BTreeMap<_, _> = pairs.iter().cloned().collect();
        assert_eq!(key(&forward), key(&backward));
        assert_eq!(key(&forward), key(&btree));
    }

    #[test]
    fn integer_width_does_not_change_a_key() {
        assert_eq!(key(&5u8), key(&5i64));
        assert_eq!(key(&-3i8), key(&-3i64));
        assert_ne!(key(&5u8), key(&6u8));
    }

    #[test]
    fn unknown_length_sequences_encode_like_known_ones() {
        struct Unsized(Vec<u32>);
        impl Serialize for Unsized {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.iter().filter(|_| true))
            }
        }
        assert_eq!(key(&Unsized(vec![1, 2, 3])), key(&vec![1u32, 2, 3]));
    }

    #[test]
    fn distinct_inputs_give_distinct_keys() {
        let keys = [
            key("a"),
            key("b"),
            key(&("a", 1)),
            key(&("a", 2)),
            key(&["a"]),
            key(&["a", "b"]),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn every_nan_gives_one_key_per_width() {
        let quiet_payload = f64::from_bits(0x7ff8_0000_0000_0001);
        let negative = f64::from_bits(0xfff8_0000_0000_0000);
        let signalling = f64::from_bits(0x7ff0_0000_0000_0001);
        for nan in [quiet_payload, negative, signalling, -f64::NAN, f64::NAN] {
            assert!(nan.is_nan());
            assert_eq!(key(&nan), key(&f64::NAN), "{:#x}", nan.to_bits());
        }
        for nan in [f32::from_bits(0x7fc0_0001), f32::from_bits(0xffc0_0000)] {
            assert_eq!(key(&nan), key(&f32::NAN), "{:#x}", nan.to_bits());
        }
        assert_ne!(key(&f32::NAN), key(&f64::NAN));
    }

    #[test]
    fn signed_zeros_and_float_widths_are_distinct_inputs() {
        assert_ne!(key(&0.0f64), key(&-0.0f64));
        assert_ne!(key(&0.0f32), key(&-0.0f32));
        assert_ne!(key(&1.5f32), key(&1.5f64));
        assert_ne!(key(&1.0f64), key(&1u8), "a float is never an integer");
    }

    #[test]
    fn some_of_a_unit_value_is_not_none() {
        #[derive(Serialize)]
        struct Unit;
        #[derive(Serialize)]
        struct Wrapper(());
        assert_ne!(key(&Some(())), key(&None::<()>));
        assert_ne!(key(&Some(Unit)), key(&None::<Unit>));
        assert_ne!(key(&Some(Wrapper(()))), key(&None::<Wrapper>));
        let nested = [
            key(&None::<Option<Option<()>>>),
            key(&Some(None::<Option<()>>)),
            key(&Some(Some(None::<()>))),
            key(&Some(Some(Some(())))),
        ];
        for (i, a) in nested.iter().enumerate() {
            for b in &nested[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_ne!(key(&Some(None::<u8>)), key(&None::<Option<u8>>));
        // Only a `Some` around a nil changes: every other `Some(v)` is `v`,
        // and a unit inside a container after a `Some` is still nil.
        assert_eq!(key(&Some(5u8)), key(&5u8));
        assert_eq!(key(&(Some(5u8), ())), key(&(5u8, ())));
        assert_eq!(key(&Some(vec![()])), key(&vec![()]));
    }

    #[test]
    fn serialization_errors_and_128_bit_integers_are_reported() {
        struct Fails;
        impl Serialize for Fails {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("boom"))
            }
        }
        match content_key(&Fails) {
            Err(Error::Serialization { source, .. }) => assert_eq!(source.to_string(), "boom"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            content_key(&1u128),
            Err(Error::Serialization { .. })
        ));
    }
}
