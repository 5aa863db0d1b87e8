# runstwice — every command a developer or CI needs. `make test` is what CI
# runs (.ci/run calls it). Tools are installed into the checkout, pinned:
# Python tools into ./.venv (tools/requirements.txt), checkov into
# ./.venv-checkov (tools/requirements-checkov.txt: it pins a boto3 that
# conflicts with moto's and the SAM CLI's), Go tools into ./bin.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
PYTHON ?= python3
VENV := .venv
VENV_CHECKOV := .venv-checkov
BIN := $(CURDIR)/bin

# The moto server the integration tests start comes from the project's venv.
export RUNSTWICE_MOTO := $(CURDIR)/$(VENV)/bin/moto_server

# The Lambda Runtime Interface Emulator, pinned, built from the Go module
# proxy into ./bin (the events test and `make invoke` run bootstraps under it).
RIE_MODULE := github.com/aws/aws-lambda-runtime-interface-emulator
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
RIE := $(BIN)/aws-lambda-rie
RIE_STAMP := $(BIN)/.aws-lambda-rie-$(RIE_VERSION)
export RUNSTWICE_RIE := $(RIE)

# Lambda functions are built without the RPC shim (provided.al2023 needs none);
# `sam build` (BuildMethod go1.x) reads the tag from GOFLAGS.
LAMBDA_GOFLAGS := -tags=lambda.norpc
FUNCTIONS := $(notdir $(patsubst %/,%,$(wildcard functions/*/)))
# Checkov: CloudFormation checks only, nothing downloaded from its vendor
# (no guidelines, no custom policies), results and failures alone.
CHECKOV := $(CURDIR)/$(VENV_CHECKOV)/bin/checkov --framework cloudformation --skip-download --compact --quiet
# SAM CLI: no telemetry; region given so it never asks.
SAM := SAM_CLI_TELEMETRY=0 $(CURDIR)/$(VENV)/bin/sam
SAM_REGION ?= us-east-1

# quiet runs the command $(1) and prints only its lines that match the
# extended regular expression $(2), indented; when the command fails, every
# line it wrote (SAM's and pip's progress is noise while they succeed).
quiet = out=$$($(1) 2>&1) || { printf '%s\n' "$$out" >&2; exit 1; }; \
	printf '%s\n' "$$out" | { grep -E '$(2)' || true; } | sed 's/^/    /'

.PHONY: run test library jobctl fmt-check vet unit integration bench chaos venv venv-checkov clean rie build build-local build-sam template-check invoke chromium smoke ses-model scale-model

## run: the whole bundle on this machine (moto, the functions under
## aws-lambda-rie, the API on http://127.0.0.1:3000); Ctrl-C stops it.
## Flags for cmd/devstack go in ARGS, e.g. ARGS="--park-delay 30s",
## ARGS="--moto-port 5100", ARGS="--endpoint URL" or ARGS=--aws (every port and
## its flag: docs/tour.md, "Its ports"); faults in
## the functions' AWS calls: ARGS="--faults 'dynamodb:*:throttle=0.02,ses:*:drop=0.01'".
ARGS ?=
run: venv $(RIE_STAMP)
	@echo "==> building the local stack"
	@$(GO) build -o $(BIN)/devstack ./cmd/devstack
	@$(BIN)/devstack $(ARGS)

## jobctl: the on-call CLI, built into ./bin/jobctl (run it as bin/jobctl, so
## its exit codes are its own; `go run` turns every failure into 1).
jobctl:
	@$(GO) build -o $(BIN)/jobctl ./cmd/jobctl
	@echo "==> $(BIN)/jobctl"

## test: everything CI runs (format, vet, template checks, each library
## module on its own, unit and integration tests of every module): about
## 15 minutes on an idle 2-core machine, 18 on two busy cores (11 of them
## the chaos campaign's package).
test: fmt-check vet template-check library integration

## rie: the pinned aws-lambda-rie in ./bin.
rie: $(RIE_STAMP)

$(RIE_STAMP):
	@echo "==> building aws-lambda-rie $(RIE_VERSION) into $(BIN)"
	GOBIN=$(BIN) GOFLAGS= $(GO) install $(RIE_MODULE)/cmd/aws-lambda-rie@$(RIE_VERSION)
	rm -f $(BIN)/.aws-lambda-rie-*
	touch $@

## build: every function's bootstrap, linux/arm64 for deploy (.aws-sam/build,
## via sam build) and the host architecture for local runs (build/<fn>/bootstrap).
build: build-sam build-local

build-sam: venv
	GOFLAGS=$(LAMBDA_GOFLAGS) $(SAM) build --region $(SAM_REGION)

build-local:
	@for fn in $(FUNCTIONS); do \
	  echo "==> build/$$fn/bootstrap ($$($(GO) env GOOS)/$$($(GO) env GOARCH))"; \
	  CGO_ENABLED=0 GOFLAGS=$(LAMBDA_GOFLAGS) $(GO) build -o build/$$fn/bootstrap ./functions/$$fn; \
	done

## template-check: cfn-lint, sam validate --lint, checkov and sam build on
## template.yaml (all offline: no AWS account, no network beyond the Go module
## proxy). Checkov's security checks pass or are skipped in the resource's own
## Metadata (checkov: skip:), each with the reason.
template-check: venv venv-checkov
	@echo "==> cfn-lint template.yaml and the examples' templates"
	@$(VENV)/bin/cfn-lint template.yaml examples/*/template.yaml
	@echo "==> sam validate --lint"
	@$(call quiet,$(SAM) validate --lint --region $(SAM_REGION),is a valid SAM Template)
	@echo "==> checkov template.yaml"
	@$(call quiet,$(CHECKOV) -f template.yaml,^(Passed|Failed) checks)
	@echo "==> sam build (linux/arm64)"
	@$(call quiet,GOFLAGS=$(LAMBDA_GOFLAGS) $(SAM) build --region $(SAM_REGION),^(Build Succeeded|Built Artifacts))

## invoke: FN=<dir under functions/> EVENT=events/X.json [V=1] — run that function's
## bootstrap under aws-lambda-rie with the event and events/env.json against
## the local AWS endpoint (AWS_ENDPOINT_URL, else the running `make run`
## stack's) and print the response: the docker-free `sam local invoke`. It
## shows the function's JSON log lines; V=1 shows the emulator's lines too.
FN ?=
EVENT ?=
V ?=
ENV_FILE ?= events/env.json
invoke: $(RIE_STAMP)
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo "usage: make invoke FN=<dir under functions/, e.g. email> EVENT=events/<file>.json [V=1]"; exit 2; }
	@$(GO) run ./cmd/invoke -fn $(FN) -event $(EVENT) -env-file $(ENV_FILE) $(if $(V),-v)

## smoke: STACK=<stack name> USER=<test user id> — opt-in, never in CI: read the
## stack's outputs, enqueue a welcome mail for USER through the stack's API with
## the signed producer client (the AWS configuration chain), wait for Succeeded
## (TIMEOUT, default 2m), read the job back, check that every alarm of the stack
## exists, is not in ALARM and notifies the alarm topic, and print a report.
## API=<url> instead of STACK points it at an API alone (no outputs, no alarms),
## e.g. the local stack: make smoke API=http://127.0.0.1:3000 USER=u-demo-2
STACK ?=
API ?=
TIMEOUT ?= 2m
smoke:
	@test -n "$(STACK)$(API)" || { echo "usage: make smoke STACK=<stack name> USER=<test user id> [TIMEOUT=2m] (or API=<url> instead of STACK)"; exit 2; }
	@test "$(origin USER)" = "command line" || { echo "make smoke: USER=<test user id> is required (a user in the stack's users table)"; exit 2; }
	$(GO) run ./cmd/smoke $(if $(STACK),--stack "$(STACK)") $(if $(API),--api "$(API)") --user "$(USER)" --timeout "$(TIMEOUT)"

## chromium: a Chromium or Google Chrome for the browser test of the local
## web view (tools/chromium.sh). One found on the machine is used:
## RUNSTWICE_CHROMIUM, else chromium, chromium-browser or google-chrome on the
## PATH, else the app in /Applications (macOS). Only when there is none is
## one installed: Debian's chromium (apt-get, with sudo unless root) on
## Debian; anywhere else it says what to install (macOS: brew install
## --cask google-chrome). The browser test finds it the same way.
chromium:
	@tools/chromium.sh install

## venv-checkov: checkov, pinned, in ./.venv-checkov.
venv-checkov: $(VENV_CHECKOV)/.installed

$(VENV_CHECKOV)/.installed: tools/requirements-checkov.txt
	@echo "==> installing checkov (pinned) into $(VENV_CHECKOV) (first run only; a minute or two)"
	@$(PYTHON) -m venv $(VENV_CHECKOV)
	@$(call quiet,$(VENV_CHECKOV)/bin/pip install --disable-pip-version-check --progress-bar off -q -r tools/requirements-checkov.txt,^ERROR)
	@echo "==> $$(grep -E '^checkov==' tools/requirements-checkov.txt) in $(VENV_CHECKOV)"
	@touch $@

## venv: the pinned Python tools (moto server, cfn-lint, SAM CLI) in ./.venv.
venv: $(VENV)/.installed

$(VENV)/.installed: tools/requirements.txt
	@echo "==> installing the pinned Python tools into $(VENV) (first run only; a minute or two)"
	@$(PYTHON) -m venv $(VENV)
	@$(call quiet,$(VENV)/bin/pip install --disable-pip-version-check --progress-bar off -q -r tools/requirements.txt,^ERROR)
	@echo "==> $$($(VENV)/bin/pip list --disable-pip-version-check --format=freeze | wc -l | tr -d ' ') packages in $(VENV): $$(grep -E '^(moto|cfn-lint|aws-sam-cli)==' tools/requirements.txt | tr '\n' ' ')"
	@touch $@

# The library's modules (go.work ties them to the bundle at the root for
# development); PKGS names every package of every module from the root.
LIBRARY := engine aws/dynamostore aws/sqsqueue aws/ssmswitch
PKGS := ./... $(addprefix ./,$(addsuffix /...,$(LIBRARY)))

## library: each library module on its own, outside the workspace, as an
## importer gets it: tidy, vetted and tested with nothing of the bundle.
library:
	@for m in $(LIBRARY); do \
	  echo "==> $$m (its own module)"; \
	  (cd $$m && GOWORK=off $(GO) mod tidy -diff && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -count=1 ./...) || exit 1; \
	done

fmt-check:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.venv/*' -not -path './.aws-sam/*')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags integration $(PKGS)

## unit: the unit tests alone (fakes only, no emulator).
unit:
	$(GO) test -count=1 $(PKGS)

## integration: unit and integration tests; integration tests start moto.
## The chaos package runs a short campaign with the clock campaign, four
## mutated ones and one mutated clock campaign, three at a time (see
## docs/chaos.md for its time on 2 cores), past go test's default 10-minute
## limit per package.
integration: venv $(RIE_STAMP) chromium
	$(GO) test -count=1 -race -timeout 30m -tags integration $(PKGS)

## chaos: the whole local stack under faults — AWS calls throttled, failed,
## cut, delayed or applied with the response lost, SSM and SES away for a
## while, function processes killed at every step boundary, twin, copied,
## delayed and cancelled jobs, a switch flipped, letters redriven — then the
## ledger from ground truth (mails SES holds, markers, jobs, dead letters),
## printed and written to .devstack/chaos-ledger.json; exits 1 when an
## invariant breaks, naming the job ids. N jobs (300; N=10000 for the long
## run), SEED=1; then the clock campaign: the virtual clock jumps 31, 60,
## 365 and 400 days between enqueue, cancel, run-now and delivery.
## Continuations and batches ride along (a tenth of the jobs each), batch
## accepts killed mid-way. MUTATE=no-claim|no-peek|ignore-switch|no-lease|
## short-guards|no-sweep|skip-pages|relay-forgets|continuation-unguarded
## breaks the runner on purpose (the run must then fail). A short run is
## part of `make test`.
N ?= 300
SEED ?= 1
MUTATE ?=
chaos: venv $(RIE_STAMP)
	@$(GO) run ./cmd/chaos -n $(N) -seed $(SEED) $(if $(MUTATE),-mutate $(MUTATE))

## bench: what runstwice costs, as one table: the runner in-process (time
## and allocations per job; traced against untraced, and untraced against
## the commit before traces), the worker on moto (DynamoDB calls per job, time
## per batch), the enqueue API under load through the local stack, and each
## function's init time under the emulator, with and without an OTLP
## endpoint. Targets are printed beside them.
bench: venv $(RIE_STAMP)
	@$(GO) run ./cmd/bench

## ses-model: the scale model of sending within SES's rate with its full
## backlog: 10,000 digests on the bulk queue at 1, 14 and 100 mails a second,
## the real runner, pacing and back-off against simulated SQS and Lambda with
## the template's settings, on a fake clock (seconds, not hours); it prints
## docs/deploy.md's table. `make test` runs it with 1,000 digests.
ses-model:
	$(GO) test -count=1 -run 'TestBacklogDrainsAtTheAccountRate' -v ./internal/dev/sesmodel -full

## scale-model: the scale model of continuations (docs/scale.md): an hour of
## 1,000 continuations a second with 100,000 parents waiting, the real
## reservation, chain stream handler and continuation sweep against a
## simulated jobs table that refuses what one DynamoDB item or partition key
## would (400 KB, 1,000 writes a second), on a fake clock. `make test` runs
## five minutes of 100 a second. 19 to 22 minutes here; its live heap
## stays under 1 GB: GOGC=off with GOMEMLIMIT=3GiB collects only as the
## process nears 3 GiB, which spares most of the collector's work
## (GOGC=100 costs some 40 % more time).
scale-model:
	GOGC=off GOMEMLIMIT=3GiB $(GO) test -count=1 -timeout 90m -run 'TestContinuationsAtScale' -v ./internal/dev/scalemodel -full

clean:
	rm -rf $(BIN) .devstack .aws-sam build
