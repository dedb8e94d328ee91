"""damacy.samplers: plans, torch-style sampling, resumption, and a torchrun-like launch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import damacy
from damacy.samplers import DistributedSampler, IndexSpace, crop_space, rank_info


def _ids(**kw):
    return list(DistributedSampler(IndexSpace([103], chunk_size=10), **kw))


@pytest.mark.parametrize("mode", ["strided", "contiguous"])
@pytest.mark.parametrize("granularity", ["sample", "chunk"])
@pytest.mark.parametrize("shuffle", [True, False, "two_level"])
def test_ranks_are_disjoint_equal_and_cover(mode, granularity, shuffle):
    world = 3
    per_rank = [
        DistributedSampler(
            IndexSpace([103], chunk_size=10),
            batch_size=4,
            shuffle=shuffle,
            window=2,
            mode=mode,
            granularity=granularity,
            equal_length="uneven",
            seed=5,
            rank=r,
            world_size=world,
        )
        for r in range(world)
    ]
    all_ids = [i for s in per_rank for i in s]
    assert sorted(all_ids) == list(range(103))
    pad = [DistributedSampler(IndexSpace([103], chunk_size=10), batch_size=4, mode=mode,
                              granularity=granularity, rank=r, world_size=world) for r in range(world)]
    assert len({p.n_batches for p in pad}) == 1
    padded = [[p for _, p in s.entries()] for s in pad]
    real = sorted(i for s, flags in zip(pad, padded) for i, p in zip(s, flags) if not p)
    assert real == list(range(103))


def test_shuffle_depends_on_seed_and_epoch():
    base = _ids(seed=1, rank=0, world_size=1)
    assert sorted(base) == list(range(103)) and base != list(range(103))
    assert base == _ids(seed=1, rank=0, world_size=1)
    assert base != _ids(seed=2, rank=0, world_size=1)
    s = DistributedSampler(IndexSpace([103]), seed=1, rank=0, world_size=1)
    first = list(s)
    s.set_epoch(1)
    second = list(s)
    assert first != second and sorted(first) == sorted(second)
    assert _ids(shuffle=False, rank=0, world_size=1) == list(range(103))


def test_drop_gives_full_batches():
    s = DistributedSampler(IndexSpace([103]), batch_size=8, equal_length="drop", rank=1, world_size=3)
    batches = list(s.batches())
    assert all(len(b) == 8 for b in batches) and len(batches) == 103 // 24
    assert len(s.batch_sampler()) == len(batches)


def test_state_dict_resumes_the_tail():
    s = DistributedSampler(IndexSpace([200]), batch_size=5, seed=3, rank=0, world_size=2)
    full = list(s)
    it = iter(s)
    seen = [next(it) for _ in range(25)]  # 5 batches
    state = s.state_dict()
    assert state["cursor"] == 5 * 5 * 2 and state["epoch"] == 0
    t = DistributedSampler(IndexSpace([200]), batch_size=5, seed=3, rank=0, world_size=2)
    t.load_state_dict(state)
    assert seen + list(t) == full
    with pytest.raises(damacy.InvalidArgument, match="seed"):
        DistributedSampler(IndexSpace([200]), seed=4, rank=0, world_size=2).load_state_dict(state)


def test_workers_split_whole_batches():
    s = DistributedSampler(IndexSpace([100]), batch_size=10, shuffle=False, rank=0, world_size=1)
    w = [list(s.worker_batches(i, 3)) for i in range(3)]
    assert [len(x) for x in w] == [4, 3, 3]
    assert sorted(i for x in w for b in x for i in b) == list(range(100))


def test_crop_space_samples():
    space = crop_space([((64, 48), (16, 16)), ((32, 32), (8, 8), None, 2)], (8, 8), placement="chunk")
    s = DistributedSampler(space, batch_size=4, shuffle=False, rank=0, world_size=1)
    samples = list(s.samples(["a.zarr/x", "a.zarr/y"]))
    assert len(samples) == len(space) == (64 // 8) * (48 // 8) + (32 // 8) ** 2
    assert samples[0] == damacy.Sample("a.zarr/x", ((0, 8), (0, 8))) == damacy.Sample("a.zarr/x", damacy.Region((0, 0), (8, 8)))
    assert {x.uri for x in samples} == {"a.zarr/x", "a.zarr/y"}
    # An entry of `uris` may name several arrays read at the same region (an image and its labels).
    pairs = list(s.samples([("a.zarr/x", "a.zarr/x_labels"), ("a.zarr/y", "a.zarr/y_labels")]))
    assert pairs[0] == damacy.Sample(("a.zarr/x", "a.zarr/x_labels"), ((0, 8), (0, 8)))
    assert [p.start for p in pairs] == [p.start for p in samples]
    random = crop_space([((64, 48), (16, 16))], (8, 8), count=50)
    assert len(list(DistributedSampler(random, rank=0, world_size=1).samples(["u"]))) == 50


def test_index_samples_need_a_row_shape():
    s = DistributedSampler(IndexSpace([4, 6]), shuffle=False, rank=0, world_size=1)
    rows = list(s.samples(["p", "q"], row_shape=(3, 5)))
    assert rows[5] == damacy.Sample("q", damacy.Region((1, 0, 0), (1, 3, 5))) == damacy.Sample("q", ((1, 2), (0, 3), (0, 5)))
    with pytest.raises(damacy.InvalidArgument, match="row_shape"):
        next(s.samples(["p", "q"]))


def test_rank_sources(monkeypatch):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert rank_info("env") == (2, 4, 0)
    assert DistributedSampler(IndexSpace([10])).rank == 2
    assert rank_info(lambda: (1, 3)) == (1, 3, None)
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(damacy.InvalidArgument, match="RANK"):
        rank_info("env")
    with pytest.raises(damacy.InvalidArgument, match="dist_info"):
        rank_info("mpi")
    with pytest.raises(damacy.InvalidArgument, match="out of range"):
        rank_info(lambda: (3, 3))


def test_bad_options_are_invalid_argument():
    with pytest.raises(damacy.InvalidArgument, match="mode"):
        DistributedSampler(IndexSpace([10]), mode="diagonal", rank=0, world_size=1)
    with pytest.raises(damacy.InvalidArgument, match="batch size is 0"):
        DistributedSampler(IndexSpace([10]), batch_size=0, rank=0, world_size=1)
    with pytest.raises(damacy.InvalidArgument, match="Drop leaves no full batch"):
        DistributedSampler(IndexSpace([3]), batch_size=2, equal_length="drop", rank=0, world_size=2)


def test_sampler_does_not_import_torch():
    code = "import sys, damacy.samplers as s; list(s.DistributedSampler(s.IndexSpace([5]), rank=0, world_size=1)); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_two_processes_like_torchrun_cover_the_dataset_once(tmp_path):
    """Two processes launched with RANK / WORLD_SIZE / LOCAL_RANK as torchrun sets them each
    stream their rank's plan; together they read every sample exactly once."""
    script = tmp_path / "worker.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, os, sys
            from damacy.samplers import DistributedSampler, crop_space
            space = crop_space([((40, 30), (10, 10)), ((20, 20), (10, 10))], (5, 5), placement="chunk")
            s = DistributedSampler(space, batch_size=3, seed=11, granularity="chunk",
                                   equal_length="uneven", dist_info="env")
            s.set_epoch(2)
            regions = [[x.uri, list(x.start)] for x in s.samples(["a", "b"])]
            json.dump({"rank": s.rank, "world": s.world_size, "local": s.local_rank,
                       "regions": regions}, open(sys.argv[1], "w"))
            """
        )
    )
    procs = []
    for rank in range(2):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
        out = tmp_path / f"rank{rank}.json"
        procs.append((subprocess.Popen([sys.executable, str(script), str(out)], env=env), out))
    import json

    results = []
    for p, out in procs:
        assert p.wait(timeout=60) == 0
        results.append(json.loads(out.read_text()))
    assert [(r["rank"], r["world"], r["local"]) for r in results] == [(0, 2, 0), (1, 2, 1)]
    seen = [tuple([u, *s]) for r in results for u, s in r["regions"]]
    assert len(seen) == len(set(seen)) == (40 // 5) * (30 // 5) + (20 // 5) ** 2
    by_rank = [{(u, s[0] // 10, s[1] // 10) for u, s in r["regions"]} for r in results]
    assert not by_rank[0] & by_rank[1], "chunk granularity: no chunk on two ranks"


# -- dist_info="torch" and "jax", with stand-in modules (neither is installed by make test) ---


class _Called(AssertionError):
    pass


def _fake_torch(monkeypatch, *, available=True, initialized=False, rank=0, world=1, worker=None):
    """``torch`` and ``torch.distributed`` in ``sys.modules``: what the samplers ask of them."""
    import types

    torch = types.ModuleType("torch")
    dist = types.ModuleType("torch.distributed")
    dist.is_available = lambda: available
    dist.is_initialized = lambda: initialized

    def get(value):
        def call():
            if not (available and initialized):
                raise _Called("asked torch.distributed for the rank of a process group that is not there")
            return value
        return call

    dist.get_rank, dist.get_world_size = get(rank), get(world)
    torch.distributed = dist
    data = types.SimpleNamespace(get_worker_info=lambda: worker)
    torch.utils = types.SimpleNamespace(data=data)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)


def _fake_jax(monkeypatch, *, initialized, rank=0, world=1, has_is_initialized=True):
    import types

    jax = types.ModuleType("jax")
    distributed = types.ModuleType("jax.distributed")
    if has_is_initialized:
        distributed.is_initialized = lambda: initialized

    def get(value):
        def call():
            if not initialized:
                raise _Called("touched JAX's backends before jax.distributed.initialize()")
            return value
        return call

    jax.process_index, jax.process_count = get(rank), get(world)
    jax.distributed = distributed
    monkeypatch.setitem(sys.modules, "jax", jax)
    monkeypatch.setitem(sys.modules, "jax.distributed", distributed)


def _torchrun_env(monkeypatch, rank, world, local):
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", str(world))
    monkeypatch.setenv("LOCAL_RANK", str(local))


def test_dist_info_torch_with_an_initialized_process_group(monkeypatch):
    _torchrun_env(monkeypatch, 0, 1, 3)  # torch.distributed's answer wins over RANK/WORLD_SIZE
    _fake_torch(monkeypatch, initialized=True, rank=2, world=5)
    assert rank_info("torch") == (2, 5, 3)
    monkeypatch.setenv("LOCAL_RANK", "x")
    assert rank_info("torch") == (2, 5, None)
    space = IndexSpace([103], chunk_size=10)
    s = DistributedSampler(space, dist_info="torch", seed=4, equal_length="drop")
    assert (s.rank, s.world_size, len(s)) == (2, 5, 20)
    assert list(s) == list(DistributedSampler(space, seed=4, equal_length="drop", rank=2, world_size=5))
    assert list(s) != list(DistributedSampler(space, seed=4, equal_length="drop", rank=0, world_size=5))
    _fake_torch(monkeypatch, initialized=True, rank=5, world=5)
    with pytest.raises(damacy.InvalidArgument, match="rank 5 is out of range for world size 5"):
        rank_info("torch")


@pytest.mark.parametrize("available", [True, False])
def test_dist_info_torch_without_a_process_group_reads_the_environment(monkeypatch, available):
    _fake_torch(monkeypatch, available=available, initialized=False)
    _torchrun_env(monkeypatch, 1, 3, 1)
    assert rank_info("torch") == (1, 3, 1)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name)
    assert rank_info("torch") == (0, 1, None)
    s = DistributedSampler(IndexSpace([103], chunk_size=10), dist_info="torch", shuffle=False)
    assert (s.rank, s.world_size, list(s)) == (0, 1, list(range(103)))


def test_a_fake_torch_data_loader_worker_takes_its_share(monkeypatch):
    """``samples()`` inside a DataLoader worker (torch imported) yields that worker's batches."""
    import types

    _fake_torch(monkeypatch, worker=types.SimpleNamespace(id=1, num_workers=2))
    s = DistributedSampler(IndexSpace([40], chunk_size=10), batch_size=5, shuffle=False, rank=0, world_size=1)
    got = [x.start[0] for x in s.samples(["a.zarr"], row_shape=(3,))]
    want = [i for batch in s.worker_batches(1, 2) for i in batch]
    assert got == want and 0 < len(got) < 40


def test_dist_info_jax_once_initialized(monkeypatch):
    _torchrun_env(monkeypatch, 0, 1, 0)
    _fake_jax(monkeypatch, initialized=True, rank=3, world=4)
    assert rank_info("jax") == (3, 4, None)
    s = DistributedSampler(IndexSpace([100], chunk_size=10), dist_info="jax", shuffle=False)
    assert (s.rank, s.world_size, list(s)) == (3, 4, list(range(3, 100, 4)))
    _fake_jax(monkeypatch, initialized=True, rank=4, world=4)
    with pytest.raises(damacy.InvalidArgument, match="rank 4 is out of range for world size 4"):
        rank_info("jax")


def test_dist_info_jax_before_initialize_reads_the_environment_without_touching_jax(monkeypatch):
    _fake_jax(monkeypatch, initialized=False)  # process_index() would raise _Called
    _torchrun_env(monkeypatch, 1, 2, 1)
    assert rank_info("jax") == (1, 2, 1)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name)
    assert rank_info("jax") == (0, 1, None)


def test_dist_info_jax_without_is_initialized_asks_jax(monkeypatch):
    """A JAX without ``jax.distributed.is_initialized``: its process index and count."""
    _torchrun_env(monkeypatch, 1, 2, 1)
    _fake_jax(monkeypatch, initialized=True, rank=0, world=3, has_is_initialized=False)
    assert rank_info("jax") == (0, 3, None)
