# damacy — the two commands are `make demo` and `make test`; both install what they need.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
# The second interpreter the Python package is tested on, with the newest zarr-python (whose
# codec-pipeline API differs from 3.1's): requirements-py313.txt.
PYTHON313 ?= $(HOME)/.pyenv/versions/3.13.0/bin/python3
VENV313 := .venv313
VPY313 := $(VENV313)/bin/python
# The damacy wheel (abi3: one build serves both interpreters).
WHEEL_DIR := target/wheels
PYTEST_WORKERS ?= 2
CARGO ?= cargo
# NVRTC from PyPI (no CUDA toolkit needed): damacy-kernels' build compiles the kernel images it
# ships (cubins for sm_80/sm_90, PTX for later GPUs) with it, and the compile checks use it.
# Every target of `make test` and the wheel builds depend on `nvrtc`, so the images are in those
# builds; without it a build still succeeds (with a cargo warning) and compiles the kernels at
# run time (`make demo` does not download it: a CPU-only demo does not need it).
NVRTC_VERSION := 13.0.88
NVRTC_DIR := .nvrtc/$(NVRTC_VERSION)
NVRTC_WHEEL := nvidia-cuda-nvrtc==$(NVRTC_VERSION)
NVRTC_LIB := $(CURDIR)/$(NVRTC_DIR)/nvidia/cu13/lib
# The kernel images compiled by damacy-kernels' build script, shared by its builds in the other
# target folders (ASan, TSan, cost model, wheel): each kernel is compiled by NVRTC once, not once
# per folder (crates/damacy-kernels/build.rs).
export DAMACY_KERNEL_IMAGE_CACHE := $(CURDIR)/target/kernel-images

.PHONY: help demo test lint rust-test kernel-asan kernel-ubsan kernel-tsan kernel-cost fixtures fixtures-check bench venv venv313 nvrtc nvdisasm gpu-model fuzz \
	clean py-wheel py-test zarr-suite bench-python

help:
	@echo "make demo      stream random crops of a synthetic dataset through a Pipeline (damacy demo; DEMO_ARGS=--full for 512^3)"
	@echo "make test      install what is needed, then fmt, clippy, every Rust and Python test"
	@echo "make bench     run the benchmarks; results go to benches/results/"
	@echo "make fixtures  regenerate fixtures/ with zarr-python and check the digests did not move"
	@echo "make fuzz      run the cargo-fuzz targets (FUZZ_SECONDS each)"
	@echo "make py-test   build the damacy wheel once, test it on Python 3.11 (zarr 3.1) and 3.13 (newest zarr)"
	@echo "make zarr-suite  zarr-python's own test suite with damacy.GpuCodecPipeline forced (both interpreters)"

$(VENV)/.stamp: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.stamp

$(VENV313)/.stamp: requirements-py313.txt
	$(PYTHON313) -m venv $(VENV313)
	$(VPY313) -m pip install --quiet --upgrade pip
	$(VPY313) -m pip install --quiet -r requirements-py313.txt
	touch $@

venv313: $(VENV313)/.stamp

# One abi3 wheel, installed into both virtual environments.
# The test wheel also holds the kernel emulator (executor="emulated"), so the Python tests run the
# device route too; `pip install ./crates/damacy-py` builds without it.
py-wheel: venv venv313 nvrtc
	rm -f $(WHEEL_DIR)/damacy-*.whl
	$(VENV)/bin/maturin build --quiet -m crates/damacy-py/Cargo.toml --features emulate --out $(WHEEL_DIR) -i $(VPY)
	$(VPY) -m pip install --quiet --force-reinstall --no-deps $(WHEEL_DIR)/damacy-*.whl
	$(VPY313) -m pip install --quiet --force-reinstall --no-deps $(WHEEL_DIR)/damacy-*.whl

# tests/python on both interpreters, then the read/write part of zarr-python's own suite with
# damacy's pipeline forced (the whole suite: make zarr-suite).
py-test: py-wheel
	trap 'bash tests/services/services.sh stop' EXIT; \
	bash tests/services/services.sh start; \
	set -a; . .services/env; set +a; \
	$(VPY) -m pytest -q -n $(PYTEST_WORKERS) tests/python && \
	$(VPY313) -m pytest -q -n $(PYTEST_WORKERS) tests/python && \
	$(VPY) tests/python/zarr_suite.py --subset --workers $(PYTEST_WORKERS) && \
	$(VPY313) tests/python/zarr_suite.py --subset --workers $(PYTEST_WORKERS)

# zarr-python's own tests (from the installed version's sdist) with damacy's pipeline forced.
ZARR_SUITE_ARGS ?=
zarr-suite: py-wheel
	$(VPY) tests/python/zarr_suite.py --workers $(PYTEST_WORKERS) $(ZARR_SUITE_ARGS)
	$(VPY313) tests/python/zarr_suite.py --workers $(PYTEST_WORKERS) $(ZARR_SUITE_ARGS)

$(NVRTC_DIR)/.stamp:
	$(PYTHON) -m pip install --quiet --no-deps --target $(NVRTC_DIR) "$(NVRTC_WHEEL)"
	touch $@

nvrtc: $(NVRTC_DIR)/.stamp

# nvdisasm (PyPI wheel) for the GPU performance model's SASS line counts (issue 30).
NVDISASM_VERSION := 13.5.37
NVDISASM_DIR := .nvdisasm/$(NVDISASM_VERSION)
$(NVDISASM_DIR)/.stamp:
	$(PYTHON) -m pip install --quiet --no-deps --target $(NVDISASM_DIR) "nvidia-cuda-nvdisasm==$(NVDISASM_VERSION)"
	touch $@

nvdisasm: $(NVDISASM_DIR)/.stamp

# The GPU performance model's calibration report (benches/results/gpu-model.md): the H200 run's
# cases on the emulator with --model h200 (about an hour on 2 cores).
gpu-model: nvrtc nvdisasm
	bash crates/damacy-kernels/scripts/gpu_model.sh --report

# `damacy demo`: writes a small synthetic dataset on first use (~/.cache/damacy/demo), then
# streams random crops through a Pipeline on the GPU when one is usable, else the CPU.
# DEMO_ARGS=--full uses the 512^3 dataset; DEMO_ARGS="--executor emulated" the kernel emulator.
DEMO_ARGS ?=
demo:
	$(CARGO) run --release -q -p damacy-cli --features emulate -- demo $(DEMO_ARGS)

lint: nvrtc
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	# the GPU bundle's build (benches/gpu/bundle.sh): kernels crate and its examples with the CUDA
	# backend alone, as they are shipped (--all-features hides code gated on `emulate`)
	$(CARGO) clippy -p damacy-kernels --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --workspace --all-features

# Remote-store tests read from nginx and moto on loopback; the servers stop however the tests end.
# damacy-kernels' own tests run in kernel-asan (the same tests, kernels built under ASan); its
# doc examples, which cargo cannot select beside other targets, run here.
rust-test: nvrtc venv
	trap 'bash tests/services/services.sh stop' EXIT; \
	bash tests/services/services.sh start; \
	set -a; . .services/env; set +a; \
	LD_LIBRARY_PATH="$(NVRTC_LIB):$$LD_LIBRARY_PATH" DAMACY_NVRTC_DIR="$(NVRTC_LIB)" \
		$(CARGO) test --workspace --all-features --exclude damacy-kernels && \
	$(CARGO) test -p damacy-kernels --all-features --doc

# Regenerating the corpus in a scratch folder must reproduce every committed digest.
fixtures-check: venv
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && $(VPY) fixtures/generate.py --out "$$tmp" --check

# Every damacy-kernels test, with the emulated kernels built under AddressSanitizer and the
# alignment sanitizer: any out-of-bounds access by a kernel, on corrupt or truncated input too,
# and any misaligned 2/4/8/16-byte load or store (a fault on a GPU), fails the run.
kernel-asan: nvrtc
	LD_LIBRARY_PATH="$(NVRTC_LIB):$$LD_LIBRARY_PATH" DAMACY_NVRTC_DIR="$(NVRTC_LIB)" \
		bash crates/damacy-kernels/scripts/asan.sh

# Every damacy-kernels test with the emulated kernels under the alignment sanitizer alone (a
# faster check than kernel-asan, which includes it; not in `test`, where it would repeat
# kernel-asan's alignment checks at the cost of a whole run).
kernel-ubsan: nvrtc
	LD_LIBRARY_PATH="$(NVRTC_LIB):$$LD_LIBRARY_PATH" DAMACY_NVRTC_DIR="$(NVRTC_LIB)" \
		bash crates/damacy-kernels/scripts/ubsan.sh

# The emulated kernels once more, built under ThreadSanitizer with one TSan fiber per CUDA
# thread: a data race between CUDA threads (a missing __syncthreads or __syncwarp, a lost
# update, two blocks writing the same bytes) fails the run. gcc's libtsan comes with g++.
kernel-tsan: nvrtc
	bash crates/damacy-kernels/scripts/tsan.sh

# The emulated kernels built for the cost model (DAMACY_EMU_COST=1): probe kernels with known
# access patterns must give exact sectors and bank wavefronts, and every kernel must stay within
# its budget (crates/damacy-kernels/cost_budgets.toml: sectors per request, warp-requests per
# byte, bank wavefronts) on the fixture workloads. Model numbers, not GPU time.
kernel-cost: nvrtc nvdisasm
	bash crates/damacy-kernels/scripts/cost.sh

# `make test`: the set-up (venvs, NVRTC, nvdisasm) first, then two chains side by side, one per
# core of a 2-core CI machine: the host chain (lint, workspace tests, Python) and the kernel
# chain (the emulated kernels under ASan, TSan and the cost model, then the fixture corpus
# check, which needs only the set-up's venv: on 2026-12-04 the host chain took ~27 minutes and
# the kernel chain ~21, so the ~1-minute check moved to the shorter one). Each chain alone
# leaves a core idle much of the time (long single-threaded emulator tests, link steps), so the
# two overlap well. They share nothing they write but the kernel-image cache (written by
# rename) and cargo's locks; only the host chain starts the loopback servers. Output lines carry
# the chain's name; the target fails if either chain does (both run to their end).
TEST_CHAIN_HOST := lint rust-test py-test
TEST_CHAIN_KERNELS := kernel-asan kernel-tsan kernel-cost fixtures-check
test: venv venv313 nvrtc nvdisasm
	set -o pipefail; \
	( $(MAKE) --no-print-directory -j1 $(TEST_CHAIN_HOST) 2>&1 | sed -u 's/^/[host] /' ) & host=$$!; \
	( $(MAKE) --no-print-directory -j1 $(TEST_CHAIN_KERNELS) 2>&1 | sed -u 's/^/[kernels] /' ) & kernels=$$!; \
	rc_host=0; rc_kernels=0; wait $$host || rc_host=$$?; wait $$kernels || rc_kernels=$$?; \
	echo "make test: host chain ($(TEST_CHAIN_HOST)) exit $$rc_host, kernel chain ($(TEST_CHAIN_KERNELS)) exit $$rc_kernels"; \
	[ $$rc_host -eq 0 ] && [ $$rc_kernels -eq 0 ]

fixtures: venv
	$(VPY) fixtures/generate.py --check

bench: venv nvrtc bench-python
	$(VPY) -m pip install --quiet -r benches/requirements.txt
	DAMACY_NVRTC_DIR="$(NVRTC_LIB)" bash benches/run.sh

# zarr-python through damacy's pipeline vs its default vs zarrs-python, and damacy.Pipeline vs
# thread-pool loops over tensorstore and zarr-python + zarrs-python (a release wheel).
bench-python: venv nvrtc
	$(VPY) -m pip install --quiet -r benches/requirements.txt
	rm -f $(WHEEL_DIR)/release/damacy-*.whl
	$(VENV)/bin/maturin build --quiet --release -m crates/damacy-py/Cargo.toml --out $(WHEEL_DIR)/release -i $(VPY)
	$(VPY) -m pip install --quiet --force-reinstall --no-deps $(WHEEL_DIR)/release/damacy-*.whl
	$(VPY) benches/python/compare.py
	$(VPY) benches/pipeline/loaders.py

# cargo-fuzz targets for the parsers of untrusted bytes (libFuzzer; needs nightly features,
# enabled on the stable toolchain with RUSTC_BOOTSTRAP). FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 60
fuzz:
	command -v cargo-fuzz >/dev/null || $(CARGO) install --locked cargo-fuzz
	for t in shard_index metadata chunk zstd zstd_damaged inflate inflate_damaged blosc; do \
		RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run --fuzz-dir fuzz $$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

clean:
	$(CARGO) clean
	rm -rf $(VENV) $(VENV313) .nvrtc .services
