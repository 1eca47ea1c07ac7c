"""How a worker's RocksDB instance is tuned (``RocksOptions``): memtables, compression, garbage
flushes, caches and the bounds on RocksDB's own files. ``state/rocksdb.py`` opens it; what an
open instance holds in memory is ``memory_of``."""

from __future__ import annotations

from dataclasses import dataclass

from rocksdict import BlockBasedOptions, Cache, DBCompressionType, Options, Rdict

from weir.base.errors import StateError

_COMPRESSIONS = {
    "lz4": DBCompressionType.lz4,
    "snappy": DBCompressionType.snappy,
    "none": DBCompressionType.none,
}
_WAL_MODES = frozenset({"when_read", "always", "never"})


@dataclass(frozen=True, slots=True)
class RocksOptions:
    """Tuning for a worker's RocksDB instance."""

    # Memtables of 8 MiB, flushed eight at a time into one level-0 file. A put is a skiplist
    # insert whose cost grows with the memtable (its searches miss the caches), so small
    # memtables write cheaper; but flushed one by one, their many small level-0 files set off
    # compactions that rewrite the state between two checkpoints (an incremental checkpoint
    # after a bulk load uploaded most of the state: tests/unit/test_checkpoint_storage.py).
    # Merged eight to a flush, the files are as few and as large as one 64 MiB memtable made
    # (docs/decisions/0017-memtables.md has the figures).
    write_buffer_mb: int = 8
    memtables_per_flush: int = 8
    # a point lookup checks every memtable newest first: a bloom filter over each memtable's
    # keys skips those that cannot hold the key
    memtable_bloom_ratio: float = 0.1
    # of the SST files a flush or compaction writes: LZ4 makes them a little smaller than
    # RocksDB's default Snappy for a little less of the flush thread's CPU (decision 0017)
    compression: str = "lz4"
    max_background_jobs: int = 2
    block_cache_mb: int = 16  # bounded, so a worker's memory plateaus (memory holds open windows)
    # RocksDB's write-ahead log: "when_read" writes it from the first reader of the live state
    # on (``state.walgate``: weir recovers from checkpoints, never from a WAL; secondaries need
    # it to see the newest writes), "always" or "never"
    wal: str = "when_read"
    # RocksDB's own files grow for ever unless bounded: its info LOG, written on every flush, and
    # the MANIFEST, which gains an edit per flush and compaction and is copied into every
    # checkpoint. The LOG rolls as Flink's does; a MANIFEST past the bound starts again from a
    # snapshot of the live files, which is a few KiB.
    log_file_kb: int = 8 * 1024
    log_files_kept: int = 4
    manifest_kb: int = 128
    # Garbage: a streaming job writes a generation of each changed cell every flush interval
    # and merges them (a put and a delete per merged entry), so between flushes the memtables
    # fill with entries already dead, which every read of their ranges steps over one by one
    # (a point lookup on a 2,000-key job cost 86 us after 90 s against 9 us on compacted
    # files). After this many deletes the memtables are flushed (a flush drops a put whose
    # delete it holds), and a file that is mostly deletes is compacted (compaction to the last
    # level drops the deletes). While nobody reads the live state, the bound grows to as many
    # deletes as the state holds keys, so the compactions that rewrite a large state stay
    # rare; while it is read, it stays, or the lookups slowed as the state grew. Decision 0022
    # has the figures; a bulk load deletes nothing and is not affected.
    garbage_flush_deletes: int = 16_384
    compact_delete_ratio: float = 0.5
    # The memtable stays RocksDB's skiplist: a vector memtable makes puts cheaper, but secondary
    # instances inherit the primary's memtable type and a seek there sorts the whole memtable.
    # Queries are the product, so writes pay instead (the README has the figures).

    def __post_init__(self) -> None:
        if self.wal not in _WAL_MODES:
            raise StateError(
                f"RocksDB write-ahead log mode {self.wal!r} is not one of "
                f"{', '.join(sorted(_WAL_MODES))}"
            )
        if self.compression not in _COMPRESSIONS:
            raise StateError(
                f"RocksDB compression {self.compression!r} is not one weir configures; use one "
                f"of {', '.join(sorted(_COMPRESSIONS))}"
            )

    def to_options(self) -> Options:
        opts = Options(raw_mode=True)
        opts.set_compression_type(_COMPRESSIONS[self.compression]())
        opts.create_if_missing(True)
        opts.set_write_buffer_size(self.write_buffer_mb * 1024 * 1024)
        opts.set_min_write_buffer_number_to_merge(self.memtables_per_flush)
        # as many again fill while the full ones flush before writes stall: 64 MiB of room, as
        # the second 64 MiB memtable gave before (and the same 128 MiB at most)
        opts.set_max_write_buffer_number(2 * self.memtables_per_flush)
        if self.memtable_bloom_ratio > 0:
            opts.set_memtable_prefix_bloom_ratio(self.memtable_bloom_ratio)
            opts.set_memtable_whole_key_filtering(True)
        opts.set_max_background_jobs(self.max_background_jobs)
        if self.compact_delete_ratio > 0:  # a file marked so is compacted in the background
            opts.add_compact_on_deletion_collector_factory(1024, 1024, self.compact_delete_ratio)
        opts.set_max_log_file_size(self.log_file_kb * 1024)
        opts.set_keep_log_file_num(self.log_files_kept)
        opts.set_max_manifest_file_size(self.manifest_kb * 1024)
        table = BlockBasedOptions()
        table.set_block_cache(Cache(self.block_cache_mb * 1024 * 1024))
        opts.set_block_based_table_factory(table)
        return opts


# what RocksDB holds in memory, as ``memory_of`` names it: memtables (with those flushed but
# still pinned by a reader), the block cache's charge and the open tables' indexes and filters
_MEMORY = (
    ("memtables", "rocksdb.size-all-mem-tables"),
    ("block_cache", "rocksdb.block-cache-usage"),
    ("table_readers", "rocksdb.estimate-table-readers-mem"),
)


def memory_of(db: Rdict | None) -> dict[str, int]:
    """The bytes RocksDB instance ``db`` holds in memory, by kind (0 each when it is not open,
    or a property cannot be read: a gauge, never a reason to fail)."""
    out = dict.fromkeys((kind for kind, _ in _MEMORY), 0)
    if db is None:
        return out
    for kind, prop in _MEMORY:
        try:
            out[kind] = db.property_int_value(prop) or 0
        except Exception:  # closed meanwhile (it stays 0): the next report has it again
            continue
    return out


__all__ = ["RocksOptions", "memory_of"]
