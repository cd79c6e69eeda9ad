//! Property tests of the record format: what is written is read back, and
//! no input at all can make the decoder panic or hand out a record that was
//! not written whole with a matching CRC.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::borrow::Cow;

use formats::record::{
    decode_all, encode, encode_to_vec, Devices, Flags, JobRecord, ProgramEnd, Status, Suspension,
};
use proptest::prelude::*;

fn status() -> impl Strategy<Value = Status> {
    prop::sample::select(Status::ALL.to_vec())
}

fn record() -> impl Strategy<Value = JobRecord<'static>> {
    (
        (any::<u64>(), any::<u32>(), "\\PC{0,24}"),
        (any::<i64>(), any::<i64>(), any::<i64>()),
        (any::<u64>(), any::<u64>(), status(), any::<u32>()),
        prop::collection::vec((any::<i64>(), any::<i64>()), 0..6),
        // Most records hold no device (version 1), some do (version 2).
        prop::collection::vec(
            (
                "\\PC{0,12}",
                "\\PC{0,8}",
                prop::collection::vec(any::<u32>(), 0..4),
            ),
            0..3,
        ),
        // Some ran a program (version 3), or never launched it (4).
        prop::option::of((0u8..4, any::<i32>(), any::<u64>(), any::<u64>())),
    )
        .prop_map(
            |(
                (id, cores, node),
                (submit, start, end),
                (runtime, walltime, status, flags),
                s,
                d,
                p,
            )| {
                JobRecord {
                    id,
                    cores,
                    node: Cow::Owned(node),
                    submit,
                    start,
                    end,
                    runtime,
                    walltime,
                    status,
                    flags: Flags(flags),
                    suspensions: s
                        .into_iter()
                        .map(|(suspend, resume)| Suspension { suspend, resume })
                        .collect(),
                    devices: d
                        .into_iter()
                        .map(|(node, kind, ids)| Devices {
                            node: Cow::Owned(node),
                            kind: Cow::Owned(kind),
                            ids,
                        })
                        .collect(),
                    program: p.map(|(kind, value, cpu_ns, max_rss_kib)| ProgramEnd {
                        kind,
                        value,
                        cpu_ns,
                        max_rss_kib,
                    }),
                }
            },
        )
}

fn stream(recs: &[JobRecord<'static>]) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut ends = Vec::new();
    for r in recs {
        encode(r, &mut bytes).unwrap();
        ends.push(bytes.len());
    }
    (bytes, ends)
}

/// Whether `needle` occurs in `hay`.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Every record the decoder yields must be a frame that occurs, byte for
/// byte and CRC included, in the input: encoding is canonical, so the
/// re-encoded record is exactly the frame it came from.
fn assert_all_genuine(input: &[u8], out: &[JobRecord<'static>]) {
    for r in out {
        let frame = encode_to_vec(r).unwrap();
        assert!(
            contains(input, &frame),
            "decoder yielded a record not in the input: {r:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn round_trip(recs in prop::collection::vec(record(), 0..20)) {
        let (bytes, _) = stream(&recs);
        let (out, stats) = decode_all(&bytes);
        prop_assert_eq!(&out, &recs);
        prop_assert_eq!(stats.records, recs.len() as u64);
        prop_assert_eq!(stats.damaged() + stats.unsupported + stats.skipped_bytes, 0);
    }

    #[test]
    fn arbitrary_bytes_never_panic_nor_forge(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let (out, _) = decode_all(&bytes);
        assert_all_genuine(&bytes, &out);
    }

    #[test]
    fn magic_laden_noise_never_forges(
        chunks in prop::collection::vec(
            prop_oneof![
                Just(b"CLJR".to_vec()),
                Just(b"CLJR\x01\x00".to_vec()),
                prop::collection::vec(any::<u8>(), 0..40),
            ],
            0..40,
        )
    ) {
        let bytes: Vec<u8> = chunks.concat();
        let (out, _) = decode_all(&bytes);
        assert_all_genuine(&bytes, &out);
    }

    #[test]
    fn frames_in_noise_are_all_found(
        parts in prop::collection::vec(
            (record(), prop::collection::vec(any::<u8>(), 0..64)),
            1..12,
        )
    ) {
        // Garbage between intact frames (a stray file concatenated, a
        // partly overwritten block) costs no intact frame.
        let mut bytes = Vec::new();
        for (r, noise) in &parts {
            bytes.extend_from_slice(noise);
            encode(r, &mut bytes).unwrap();
        }
        let (out, stats) = decode_all(&bytes);
        let want: Vec<_> = parts.iter().map(|(r, _)| r.clone()).collect();
        prop_assert_eq!(&out, &want);
        let noisy = parts.iter().any(|(_, n)| !n.is_empty());
        prop_assert_eq!(stats.damaged() > 0, noisy, "{:?}", stats);
    }

    #[test]
    fn truncation_keeps_every_whole_frame_and_counts_the_torn_one(
        recs in prop::collection::vec(record(), 1..12),
        cut in any::<prop::sample::Index>(),
    ) {
        let (bytes, ends) = stream(&recs);
        let at = cut.index(bytes.len() + 1);
        let (out, stats) = decode_all(&bytes[..at]);
        let whole = ends.iter().filter(|&&e| e <= at).count();
        prop_assert_eq!(&out[..], &recs[..whole]);
        let mid_frame = !ends.contains(&at) && at != 0;
        prop_assert_eq!(stats.damaged() > 0, mid_frame, "{:?}", stats);
    }

    #[test]
    fn a_bit_flip_costs_exactly_the_frame_it_hits(
        recs in prop::collection::vec(record(), 1..12),
        pos in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let (mut bytes, ends) = stream(&recs);
        let at = pos.index(bytes.len());
        bytes[at] ^= 1 << bit;
        let hit = ends.iter().position(|&e| at < e).unwrap();
        let (out, stats) = decode_all(&bytes);
        assert_all_genuine(&bytes, &out);
        // CRC-32 catches every single-bit error, and resynchronisation from
        // the damaged frame's start finds the next one: all others survive.
        let mut want = recs.clone();
        want.remove(hit);
        prop_assert_eq!(&out, &want);
        prop_assert!(stats.damaged() + stats.unsupported >= 1, "{:?}", stats);
    }

    #[test]
    fn random_damage_never_forges(
        recs in prop::collection::vec(record(), 1..12),
        hits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let (mut bytes, _) = stream(&recs);
        for (i, v) in hits {
            let at = i.index(bytes.len());
            bytes[at] = v;
        }
        let (out, _) = decode_all(&bytes);
        assert_all_genuine(&bytes, &out);
    }
}
