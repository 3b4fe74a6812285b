// Deferred frees, made durable: theory.
//
// What for. `zpool import -F` may fall back to an older uberblock only if that uberblock's
// tree (MOS, space-map blocks, volume trees, intent-log chains) is still on disk. A block
// freed in txg N is therefore handed out again only once txg N + kTxgDefer is durable
// (OpenZFS's ms_defer ring, TXG_DEFER_SIZE), so while txg T is the newest durable one and
// T + 1 is being written, the trees of T - kTxgDefer .. T are intact: import can rewind
// kTxgDefer txgs. Held only in memory, that guarantee ended with the process: a fresh
// import computes free space from the newest MOS alone (allocatable range - space-map live
// set - the MOS and space-map blocks), so the previous txgs' MOS blocks and the blocks
// their trees alone named were free at once, and a CLI command (one import each) wrote
// over them. So each txg's deferred frees are stored with the MOS.
//
// What is stored. The MOS of txg T lists, for each txg t with T - kTxgDefer < t <= T whose
// frees are not yet allocatable, the blocks holding t's list: space-map blocks
// (mos_format.h) whose records are all frees, one per extent t freed (adjacent extents
// merged). Such a list is written once, by txg t itself, and named by the MOSes of
// t .. t + kTxgDefer - 1; txg t + kTxgDefer releases it and frees its blocks, into its own
// list, like the MOS block before it (a chain, never a cycle: a list's own blocks are
// allocated after it is complete). The MOS is written as version 6 while it lists any.
//
// Every free enters the list of the txg that makes it: a tree's blocks (SyncContext::Free),
// intent-log blocks (ZilManager::FreeToTxg) and the metadata the txg replaces (the previous
// MOS, condensed space-map blocks, released lists' blocks).
//
// Import. The listed extents are taken out of the free space the candidate's MOS gives,
// after the intent-log claims: a chain block the session after that MOS wrote may lie in
// space the MOS still lists (the log allocates from space released later; this happens on
// a rewind), and then the claim keeps it and the list keeps the rest. An extent that
// overlaps the live set or a metadata block is corruption; so is one listed twice. The
// lists are re-keyed so that the first txg of the new session releases what the txg after
// the imported one would have: a rewind continues txg numbers past the damaged ones.
//
// Free space reported (Pool::Info's `free`, `available`, and the admission checks of
// reservations) counts the deferred frees as free, as zfs's `available` does: they come
// back within kTxgDefer commits, and a write that finds no allocatable room commits for
// them (PoolImpl::CommitForSpace). What is allocatable now is free_bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "pool/blkptr_format.h"
#include "pool/mos_format.h"

namespace volstack::pool {

// One txg's frees as the records of its deferred-frees blocks: adjacent extents merged,
// sorted by vdev and offset, at most kSpaceMapEntriesPerBlock per block. Requires the
// extents to be disjoint.
std::vector<std::vector<SpaceMapEntry>> DeferBlockRecords(const std::vector<Dva>& freed,
                                                          size_t nvdevs);

// The extents of records read back, as DVAs of at most 1 GiB each (a DVA's size field is
// 32 bits of sectors).
std::vector<Dva> DeferRecordDvas(const std::vector<SpaceMapEntry>& records);

}  // namespace volstack::pool
