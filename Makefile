# damacy — the two commands are `make demo` and `make test`; both install what they need.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
CARGO ?= cargo
# NVRTC from PyPI, for the kernel compile checks (no CUDA toolkit needed).
NVRTC_VERSION := 13.0.88
NVRTC_DIR := .nvrtc/$(NVRTC_VERSION)
NVRTC_WHEEL := nvidia-cuda-nvrtc==$(NVRTC_VERSION)
NVRTC_LIB := $(CURDIR)/$(NVRTC_DIR)/nvidia/cu13/lib

.PHONY: help demo test lint rust-test kernel-asan fixtures fixtures-check bench venv nvrtc fuzz clean

help:
	@echo "make demo      stream random crops of a synthetic dataset through a Pipeline (damacy demo; DEMO_ARGS=--full for 512^3)"
	@echo "make test      install what is needed, then fmt, clippy, every Rust and Python test"
	@echo "make bench     run the benchmarks; results go to benches/results/"
	@echo "make fixtures  regenerate fixtures/ with zarr-python and check the digests did not move"
	@echo "make fuzz      run the cargo-fuzz targets (FUZZ_SECONDS each)"

$(VENV)/.stamp: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.stamp

$(NVRTC_DIR)/.stamp:
	$(PYTHON) -m pip install --quiet --no-deps --target $(NVRTC_DIR) "$(NVRTC_WHEEL)"
	touch $@

nvrtc: $(NVRTC_DIR)/.stamp

# `damacy demo`: writes a small synthetic dataset on first use (~/.cache/damacy/demo), then
# streams random crops through a Pipeline on the GPU when one is usable, else the CPU.
# DEMO_ARGS=--full uses the 512^3 dataset; DEMO_ARGS="--executor emulated" the kernel emulator.
DEMO_ARGS ?=
demo:
	$(CARGO) run --release -q -p damacy-cli --features emulate -- demo $(DEMO_ARGS)

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --workspace --all-features

# Remote-store tests read from nginx and moto on loopback; the servers stop however the tests end.
rust-test: nvrtc venv
	trap 'bash tests/services/services.sh stop' EXIT; \
	bash tests/services/services.sh start; \
	set -a; . .services/env; set +a; \
	LD_LIBRARY_PATH="$(NVRTC_LIB):$$LD_LIBRARY_PATH" DAMACY_NVRTC_DIR="$(NVRTC_LIB)" \
		$(CARGO) test --workspace --all-features

# Regenerating the corpus in a scratch folder must reproduce every committed digest.
fixtures-check: venv
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && $(VPY) fixtures/generate.py --out "$$tmp" --check

# The emulated kernels once more, built under AddressSanitizer: any out-of-bounds access by a
# kernel, on corrupt or truncated input too, fails the run.
kernel-asan:
	bash crates/damacy-kernels/scripts/asan.sh

test: venv lint rust-test kernel-asan fixtures-check
	@if compgen -G "tests/python/test_*.py" > /dev/null; then \
		$(VPY) -m pytest -q tests/python; \
	else echo "no Python tests yet"; fi

fixtures: venv
	$(VPY) fixtures/generate.py --check

bench: venv nvrtc
	$(VPY) -m pip install --quiet -r benches/requirements.txt
	DAMACY_NVRTC_DIR="$(NVRTC_LIB)" bash benches/run.sh

# cargo-fuzz targets for the parsers of untrusted bytes (libFuzzer; needs nightly features,
# enabled on the stable toolchain with RUSTC_BOOTSTRAP). FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 60
fuzz:
	command -v cargo-fuzz >/dev/null || $(CARGO) install --locked cargo-fuzz
	for t in shard_index metadata chunk; do \
		RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run --fuzz-dir fuzz $$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

clean:
	$(CARGO) clean
	rm -rf $(VENV) .nvrtc .services
