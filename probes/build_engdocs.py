"""Write the shipped ``probes/engdocs/`` probe set: internal engineering docs of a fictional company.

Tarnwick Parcel Systems does not exist; neither do its services, teams, people, tools (Kettlemq,
Gravelbase, Cinderstore, Slipway, Bellhop, Vaultwick, Chirpwell) or base images (the ``tarn*``
family, the Tarnix OS layer).  The documents and questions were written by hand for flarebench
and live in this file, so they can be reviewed and changed in one place; running it writes
``corpus.jsonl``, ``probes.jsonl`` and ``README.md`` deterministically (two runs give identical
bytes)::

    python probes/build_engdocs.py            # rewrite probes/engdocs/
    python probes/build_engdocs.py --check    # exit 1 if the committed files differ

Every probe lists its reasoning steps as ``(doc id, quoted text)`` pairs: the quoted text must occur
verbatim in that document, and the gold documents are the documents of the steps, in order.
``check()`` verifies that, plus: every document id is unique, every document has 80-300 words,
every non-yes/no answer (each item of a set, the first alias of a single answer) occurs in one of
its gold documents, and a few facts that the chains rely on are unambiguous (each queue has
exactly one owner, each service exactly one production image tag).
"""

# The documents are prose, one paragraph per line, as they would be written: long lines are meant.
# ruff: noqa: E501

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

OUT = Path(__file__).resolve().parent / "engdocs"
ANSWER_TYPES = ("single", "set", "yes_no")
KINDS = ("lookup", "multi-hop", "version-chain", "policy-exception", "incident", "aggregation")

# --- the documents ---------------------------------------------------------------------------
# (id, title, text).  Text is plain prose with a few "key: value" lines, as such docs are written.

DOCS: list[tuple[str, str, str]] = [
    # --- teams ---
    (
        "team-kestrel",
        "Team Kestrel",
        """Team Kestrel builds and runs Tarnwick's payment and edge services: ledgerbird (payment settlement) and quillgate (the public API gateway).
Team lead: Ines Marrowby. Engineering manager: Piet Oyelaran.
Chat channel: #kestrel-pay.
Working hours: 09:00-18:00 on weekdays, Europe/Lisbon time.
Kestrel's on-call rotations, escalation path and first steps for a page are described in the Kestrel on-call handbook. Requests for new payment methods go through the intake form pinned in #kestrel-pay; requests that change the gateway's public routes need an ADR reviewed by Kestrel and Team Lantern. Kestrel shares a Kettlemq cluster with Team Wren, because settlements and invoices travel between their services, and coordinates broker upgrades with Team Lantern two weeks ahead.""",
    ),
    (
        "team-heron",
        "Team Heron",
        """Team Heron builds and runs Tarnwick's routing and warehouse services: parcelpath (route planning) and hollowcrate (warehouse inventory).
Team lead: Tomasz Ebberly. Engineering manager: Ruth Calloway.
Chat channel: #heron-routes.
Working hours: 08:30-17:30 on weekdays, America/Toronto time.
Heron publishes a weekly route-quality report every Thursday and reviews depot onboarding requests in its Tuesday planning meeting. For anything that affects parcel routes during Peak Week, talk to Heron at least a month ahead: route models are frozen well before the change freeze starts. The on-call rotations and escalation path are in the Heron on-call handbook.""",
    ),
    (
        "team-osprey",
        "Team Osprey",
        """Team Osprey builds and runs Tarnwick's label and customer notification services: stampmill (shipping label rendering) and driftmark (customer notifications by email and SMS).
Team lead: Yusra Fenholt. Engineering manager: Amadou Brightwater.
Chat channel: #osprey-print.
Working hours: 09:00-18:00 on weekdays, Asia/Singapore time.
Osprey also looks after the depot printer fleet together with the depot operations group: printer firmware, label stock and the printer-bridge sidecar that stampmill uses. Template changes for customer messages are requested through #osprey-print with at least three working days' notice, because every template is translated into four languages. The on-call rotations and escalation path are in the Osprey on-call handbook.""",
    ),
    (
        "team-wren",
        "Team Wren",
        """Team Wren builds and runs Tarnwick's billing and identity services: tallyvane (invoicing) and sablekey (session token signing).
Team lead: Dmitri Ashgrove. Engineering manager: Solveig Padmore.
Chat channel: #wren-billing.
Working hours: 09:00-17:00 on weekdays, Europe/Berlin time.
Wren works closely with the finance department on invoice formats and tax rules, and with Team Kestrel on settlements, since tallyvane and ledgerbird exchange invoices and settlement results. Anything that touches token signing keys needs two people from Wren present, as described in the signing key rotation runbook. The on-call rotations and escalation path are in the Wren on-call handbook.""",
    ),
    (
        "team-lantern",
        "Team Lantern (platform)",
        """Team Lantern is Tarnwick's platform team. It builds the tarn* family of base images (tarnjvm, tarnpy, tarngo, tarnnode) and publishes image notes for each, runs the Kettlemq broker clusters and the Gravelbase and Cinderstore database clusters, and operates Slipway, the deploy pipeline, and Bellhop, the paging tool.
Team lead and platform lead: Hollis Quarrington. Engineering manager: Marit Dunleavy.
Chat channel: #lantern-platform.
Working hours: 09:00-17:30 on weekdays, Europe/Dublin time.
Lantern engineers act as the second approver for deploys of tier-1 services, and the platform lead signs base image waivers. Lantern reviews the waiver register monthly and announces base image end-of-life dates at least six months ahead in #lantern-platform.""",
    ),
    # --- service cards ---
    (
        "svc-ledgerbird",
        "Service card: ledgerbird",
        """Service card: ledgerbird
Owner: Team Kestrel. Tier: tier-1. Language: Java. Handles payment data: yes.
ledgerbird settles customer payments with Tarnwick's card acquirer. It consumes invoice-out-q, asks the acquirer to capture each invoiced amount, and publishes every settlement result on pay-settle-q, the payments settlement queue, which ledgerbird owns. Settlements that fail after all retries land on the dead-letter queue pay-settle-dlq, also owned by ledgerbird. Both queues are Kettlemq queues; the Kettlemq cluster map shows where they live.
Datastore: Gravelbase cluster gb-pay-03 (settlements, idempotency keys).
Production deployment: see the ledgerbird deploy manifest; environment-specific settings are in the ledgerbird production overrides.
Runbook for queue backlogs: payments settlement backlog.
Dashboards: ledgerbird-overview, pay-settle-depth.""",
    ),
    (
        "svc-quillgate",
        "Service card: quillgate",
        """Service card: quillgate
Owner: Team Kestrel. Tier: tier-1. Language: Go. Handles payment data: no.
quillgate is the public API gateway: it terminates TLS for every public API call, checks the caller's session token (signed by sablekey), applies rate limits, and routes requests to parcelpath, stampmill and tallyvane. quillgate owns no queues.
Datastore: Cinderstore cluster cs-edge-01 holds the rate-limit counters; the limits themselves are in the quillgate rate limits config.
Production deployment: see the quillgate deploy manifest (two regions).
Runbook: gateway 5xx spikes.
Dashboards: quillgate-edge, quillgate-latency.""",
    ),
    (
        "svc-parcelpath",
        "Service card: parcelpath",
        """Service card: parcelpath
Owner: Team Heron. Tier: tier-1. Language: Python. Handles payment data: no.
parcelpath plans delivery routes for every depot each night and re-plans during the day when parcels are added or a van breaks down. It publishes route events (parcel picked up, out for delivery, delivered, returned) on route-events-q, the route events queue, which parcelpath owns. It consumes stock-sync-q to learn which parcels are in which depot.
Datastore: Gravelbase cluster gb-route-01.
Production and staging deployments: see the parcelpath deploy manifests.
Dashboards: parcelpath-plans, route-events-rate.""",
    ),
    (
        "svc-hollowcrate",
        "Service card: hollowcrate",
        """Service card: hollowcrate
Owner: Team Heron. Tier: tier-2. Language: Java. Handles payment data: no.
hollowcrate is the warehouse inventory service: it tracks which parcels sit on which shelf of which depot. It publishes stock changes on stock-sync-q, the stock sync queue, which hollowcrate owns. It consumes route-events-q so that parcels leave the depot's stock when they go out for delivery.
Datastore: Gravelbase cluster gb-stock-02 (chosen in ADR-022).
Production deployment: see the hollowcrate deploy manifest.
Runbook: stock sync lag.
Dashboards: hollowcrate-stock, stock-sync-lag.""",
    ),
    (
        "svc-stampmill",
        "Service card: stampmill",
        """Service card: stampmill
Owner: Team Osprey. Tier: tier-2. Language: Python. Handles payment data: no.
stampmill renders shipping labels and sends them to depot printers through the printer-bridge sidecar. Label requests wait on label-jobs-q, the label jobs queue, which stampmill owns. It consumes route-events-q to pre-render labels for parcels that are about to be picked up.
Datastore: Cinderstore cluster cs-label-02 caches rendered labels for 48 hours.
Production deployment: see the stampmill deploy manifest.
Runbook: label printing failures.
Dashboards: stampmill-render, label-jobs-depth.
Supported printers: ZPL printers of the depot fleet; the printer list is kept by Team Osprey.""",
    ),
    (
        "svc-driftmark",
        "Service card: driftmark",
        """Service card: driftmark
Owner: Team Osprey. Tier: tier-3. Language: TypeScript on Node.js. Handles payment data: no (receipts carry amounts only).
driftmark sends customer notifications by email and SMS: "out for delivery" and "delivered" messages and payment receipts. It consumes route-events-q and pay-settle-q. To spread sends over its workers it publishes one message per recipient on notify-fanout-q, the notification fan-out queue, which driftmark owns. SMS leave through an external gateway named in the driftmark providers config.
Datastore: none; delivery receipts are written to the shared log pipeline.
Production deployment: see the driftmark deploy manifest.
Runbook: notification delays.""",
    ),
    (
        "svc-tallyvane",
        "Service card: tallyvane",
        """Service card: tallyvane
Owner: Team Wren. Tier: tier-2. Language: Python. Handles payment data: yes.
tallyvane creates invoices for business customers and for cash-on-delivery parcels. It publishes each new invoice on invoice-out-q, the invoice outbox queue, which tallyvane owns. It consumes pay-settle-q to mark invoices as paid when a settlement succeeds.
Datastore: Gravelbase cluster gb-bill-01.
Production deployment: see the tallyvane deploy manifest.
Finance contacts: invoice formats and tax rules are agreed with the finance department; month-end closing runs on the first working day of each month.
Dashboards: tallyvane-invoices, invoice-out-depth.""",
    ),
    (
        "svc-sablekey",
        "Service card: sablekey",
        """Service card: sablekey
Owner: Team Wren. Tier: tier-1. Language: Go. Handles payment data: no.
sablekey is the token-signing service: it issues and signs the session tokens that quillgate checks on every public API call, and publishes its public keys for verification. Its signing keys never leave the Vaultwick HSM, as decided in ADR-019, so every signature is an HSM call. sablekey owns no queues.
Region: tw-north-1 only, next to the HSM.
Production deployment: see the sablekey deploy manifest.
Runbook: signing key rotation.
Dashboards: sablekey-issuance, hsm-latency.""",
    ),
    # --- platform ---
    (
        "plat-kettlemq-clusters",
        "Kettlemq cluster map",
        """Kettlemq cluster map (maintained by Team Lantern)
kmq-core-1 (tw-north-1): route-events-q, stock-sync-q, label-jobs-q.
kmq-core-2 (tw-north-1): pay-settle-q, pay-settle-dlq, invoice-out-q.
kmq-edge-1 (tw-east-2): notify-fanout-q.
All clusters run broker version 3.4. Lantern upgrades one cluster at a time in the Sunday low-traffic window and announces it in #lantern-platform a week ahead. Each service connects with its own credentials, stored in the secret store under kmq/<service> and rotated as POL-015 requires. Queue creation, deletion and retention changes go through a Lantern ticket; the owning service is recorded with each queue. Consumers may subscribe to any queue on any cluster; cross-region subscriptions to kmq-edge-1 add about 40 ms.""",
    ),
    # --- deploy manifests ---
    (
        "deploy-ledgerbird",
        "Deploy manifest: ledgerbird (production)",
        """Deploy manifest: ledgerbird (production)
service: ledgerbird
environment: production
image: registry.tarnwick.internal/ledgerbird:4.12.0
region: tw-north-1
replicas: 8
resources: cpu 2, memory 4Gi
config: ledgerbird-prod (the ledgerbird production overrides)
rollout: canary, 10% of traffic for 30 minutes, then full
kettlemq credentials: kmq/ledgerbird
Notes: staging pins the same tag. A rollback must first revert the database migration that the release notes of the running version require; ask in #kestrel-pay before rolling back. Pods are spread over three zones of the region. Deploys are approved in Slipway as POL-011 requires for the service's tier.""",
    ),
    (
        "deploy-quillgate",
        "Deploy manifest: quillgate (production)",
        """Deploy manifest: quillgate (production)
service: quillgate
environment: production
image: registry.tarnwick.internal/quillgate:7.0.3
regions: tw-north-1, tw-east-2
replicas: 12 per region
resources: cpu 1, memory 1Gi
config: quillgate-prod (rate limits and feature flags)
rollout: blue-green per region; tw-east-2 first, then tw-north-1 after 20 minutes without alerts
Notes: quillgate must be able to reach cs-edge-01 and sablekey's public key endpoint at start-up; a pod that cannot fetch the keys stays unready, and the load balancer keeps sending traffic to the old colour until it is ready. Deploys are approved in Slipway as POL-011 requires for the service's tier.""",
    ),
    (
        "deploy-parcelpath",
        "Deploy manifests: parcelpath (production and staging)",
        """Deploy manifests: parcelpath (production and staging)
production:
  image: registry.tarnwick.internal/parcelpath:2.3.1
  region: tw-north-1
  replicas: 6
  resources: cpu 4, memory 8Gi (route solving is CPU-bound)
staging:
  image: registry.tarnwick.internal/parcelpath:2.4.0b1
  region: tw-north-1
  replicas: 2
rollout: rolling, one replica at a time; night planning runs must not overlap a rollout, so production deploys happen between 10:00 and 15:00 America/Toronto.
Notes: the staging beta is being evaluated on two depots' data; it will not reach production before the Peak Week change freeze ends. Both environments read their settings from the parcelpath-prod and parcelpath-staging config maps.""",
    ),
    (
        "deploy-hollowcrate",
        "Deploy manifest: hollowcrate (production)",
        """Deploy manifest: hollowcrate (production)
service: hollowcrate
environment: production
image: registry.tarnwick.internal/hollowcrate:1.9.4
region: tw-north-1
replicas: 4
resources: cpu 2, memory 6Gi
config: hollowcrate-prod
rollout: rolling, one replica at a time
kettlemq credentials: kmq/hollowcrate
Notes: hollowcrate's consumers pause for up to two minutes while a replica restarts; the stock sync lag alert is silenced automatically during a rollout. Stock reconciliation jobs must not run while a rollout is in progress, because paused consumers make the counts look wrong. Deploys are approved in Slipway as POL-011 requires for the service's tier.""",
    ),
    (
        "deploy-stampmill",
        "Deploy manifest: stampmill (production)",
        """Deploy manifest: stampmill (production)
service: stampmill
environment: production
image: registry.tarnwick.internal/stampmill:3.0.0
sidecar: printer-bridge:1.2
region: tw-north-1
replicas: 5
resources: cpu 2, memory 3Gi
config: stampmill-prod (renderer settings, label formats)
rollout: rolling, one replica at a time
Notes: label rendering is stateless, but printer-bridge holds open connections to depot printers; a restart drops them for about ten seconds, so avoid deploying during the 06:00-08:00 depot shift start in any region, and never during a label printing incident. Deploys are approved in Slipway as POL-011 requires for the service's tier.""",
    ),
    (
        "deploy-driftmark",
        "Deploy manifest: driftmark (production)",
        """Deploy manifest: driftmark (production)
service: driftmark
environment: production
image: registry.tarnwick.internal/driftmark:5.6.2
region: tw-east-2
replicas: 3
resources: cpu 1, memory 2Gi
config: driftmark-prod (the driftmark providers config)
rollout: rolling
kettlemq credentials: kmq/driftmark
Notes: driftmark runs in tw-east-2, next to its fan-out queue, and subscribes across regions to the route events and payments settlement queues. A rollout keeps at least two replicas sending, so no notification is lost, but some may be sent a minute late. Deploys are approved in Slipway as POL-011 requires for the service's tier.""",
    ),
    (
        "deploy-tallyvane",
        "Deploy manifest: tallyvane (production)",
        """Deploy manifest: tallyvane (production)
service: tallyvane
environment: production
image: registry.tarnwick.internal/tallyvane:8.1.0
region: tw-north-1
replicas: 4
resources: cpu 2, memory 4Gi
config: tallyvane-prod (tax tables, invoice numbering)
rollout: rolling, one replica at a time
kettlemq credentials: kmq/tallyvane
Notes: do not deploy on the first working day of a month, when month-end closing runs. Tax table updates are loaded with the tallyvane-admin tool before the deploy that needs them, never after. Deploys are approved in Slipway as POL-011 requires for the service's tier.""",
    ),
    (
        "deploy-sablekey",
        "Deploy manifest: sablekey (production)",
        """Deploy manifest: sablekey (production)
service: sablekey
environment: production
image: registry.tarnwick.internal/sablekey:0.14.2
region: tw-north-1
replicas: 3
resources: cpu 1, memory 512Mi
config: sablekey-prod (token lifetimes, key ids)
rollout: rolling, one replica at a time, at least two replicas ready at all times
Notes: every replica needs a client certificate for the HSM; new replicas get one from the secret store at start-up. A replica that cannot reach the HSM fails its readiness check and receives no token requests. Deploys are approved in Slipway as POL-011 requires for the service's tier.""",
    ),
    # --- release notes ---
    (
        "rel-ledgerbird-4.12.0",
        "Release notes: ledgerbird 4.12.0",
        """Release notes: ledgerbird 4.12.0 (released 2026-03-02)
Base image: tarnjvm-21-r3 (earlier releases were built on tarnjvm-17-r9).
Changes:
- The default settle_batch_size rises from 200 to 250 settlements per batch; with the new index this removes the backlog seen in INC-2291.
- Settlement messages on pay-settle-q now carry an idempotency key, so consumers can drop duplicates.
- Retries now follow ADR-027.
Upgrade notes: run Gravelbase migration 0042 (adds the settlement_idem index) on gb-pay-03 before deploying. Rolling back to an earlier release requires reverting migration 0042 first.
Known issues: the acquirer's sandbox rejects idempotency keys longer than 40 characters; production is not affected.""",
    ),
    (
        "rel-ledgerbird-4.11.2",
        "Release notes: ledgerbird 4.11.2",
        """Release notes: ledgerbird 4.11.2 (released 2025-12-09)
Base image: tarnjvm-17-r9.
Changes:
- Fixes rounding of amounts in currencies without minor units (JPY, KRW); amounts were rounded half-down instead of half-even.
- The default settle_batch_size stays at 200.
- Adds the pay-settle-depth metric used by the payments settlement backlog alert.
Upgrade notes: no database migrations. Safe to roll back to 4.11.1.
Known issues: large settlement batches are slow when gb-pay-03 is under load; a fix is planned for the next minor release.""",
    ),
    (
        "rel-quillgate-7.0.3",
        "Release notes: quillgate 7.0.3",
        """Release notes: quillgate 7.0.3 (released 2026-01-20)
Base image: tarngo-1.22-r5.
Changes:
- Adds the x-tw-trace header to every proxied request, so traces join across services.
- Caches sablekey's public keys for 10 minutes instead of 1 minute.
- Fixes a panic when a client sends an empty Authorization header.
Upgrade notes: none; the release reads the same config as 7.0.2.
Known issues: when Cinderstore is unreachable, rate-limit checks treat the caller as over the limit. Failing open is planned for 7.1.""",
    ),
    (
        "rel-parcelpath-2.3.1",
        "Release notes: parcelpath 2.3.1",
        """Release notes: parcelpath 2.3.1 (released 2026-02-14)
Base image: tarnpy-3.11-r7.
Changes:
- Fixes routes that visited the same depot twice when a van's shift ended early.
- Route events now include the depot id of the van, which hollowcrate needs to move stock between depots.
- Reduces the night planning run from 41 to 33 minutes on the largest depot.
Upgrade notes: none.
Known issues: re-planning during the day ignores vans that report a breakdown within the last two minutes; the next re-planning run, at most ten minutes later, picks them up.""",
    ),
    (
        "rel-parcelpath-2.4.0b1",
        "Release notes: parcelpath 2.4.0b1 (beta)",
        """Release notes: parcelpath 2.4.0b1 (beta, released 2026-05-05, staging only)
Base image: tarnpy-3.12-r2.
Changes:
- New route solver that plans electric vans with charging stops.
- Route events gain an optional eta_window field.
- Drops the deprecated v1 route export.
Upgrade notes: the beta reads a new solver_profile setting; without it, it plans like 2.3.1.
Known issues: planning takes about 20% longer than 2.3.1 on depots with more than 60 vans; not for production. Feedback goes to #heron-routes, tagged with the depot id.""",
    ),
    (
        "rel-hollowcrate-1.9.4",
        "Release notes: hollowcrate 1.9.4",
        """Release notes: hollowcrate 1.9.4 (released 2025-10-30)
Base image: tarnjvm-17-r9.
Changes:
- Moves parcels between depots when a route event carries a different depot id.
- Adds the stock-sync-lag metric and alert.
- Fixes a slow query on gb-stock-02 when a depot has more than 20,000 shelves.
Upgrade notes: none.
Known issues: hollowcrate does not de-duplicate route events yet; idempotent consumption and the move to a newer base image are planned for hollowcrate 2.0, which has no release date yet; until then, run the stock reconciliation job after broker failovers.""",
    ),
    (
        "rel-stampmill-3.0.0",
        "Release notes: stampmill 3.0.0",
        """Release notes: stampmill 3.0.0 (released 2026-04-08)
Base image: tarnpy-3.12-r2.
Changes:
- New renderer, Inkwell, replaces the old template engine; labels render about three times faster.
- Removes EPL label output; only ZPL printers are supported.
- Labels include a two-dimensional code with the parcel's route id.
Upgrade notes: label templates must be converted with the inkwell-convert tool before deploying.
Known issues: none at release time.
Rollback: 2.9.3 can be redeployed at any time; it reads the old templates, which are kept next to the converted ones.""",
    ),
    (
        "rel-driftmark-5.6.2",
        "Release notes: driftmark 5.6.2",
        """Release notes: driftmark 5.6.2 (released 2026-01-12)
Base image: tarnnode-20-r2.
Changes:
- Payment receipts are sent in the customer's language when the invoice names one.
- SMS bodies longer than 160 characters are shortened instead of split into two messages.
- Fixes duplicate "delivered" emails when a route event is redelivered.
Upgrade notes: none.
Known issues: email bounce handling is delayed by up to an hour during the provider's maintenance windows. Bounced addresses are retried on the next message, not re-sent.""",
    ),
    (
        "rel-tallyvane-8.1.0",
        "Release notes: tallyvane 8.1.0",
        """Release notes: tallyvane 8.1.0 (released 2026-03-16)
Base image: tarnpy-3.11-r7.
Changes:
- Invoices carry the idempotency key of the settlement that paid them.
- New tax table format agreed with the finance department; the old one is read until year end.
- Cash-on-delivery invoices are created when the parcel is delivered, not when it is picked up.
Upgrade notes: load the 2026 tax tables with the tallyvane-admin tool before deploying.
Known issues: none.
Rollback: redeploying 8.0.4 is safe; it ignores the idempotency key field.""",
    ),
    (
        "rel-sablekey-0.14.2",
        "Release notes: sablekey 0.14.2",
        """Release notes: sablekey 0.14.2 (released 2026-02-02)
Base image: tarngo-1.22-r5.
Changes:
- Session tokens now live 15 minutes instead of 30.
- The public key endpoint lists the previous key for 24 hours after a rotation.
- HSM calls time out after 800 ms and are retried once.
Upgrade notes: quillgate 7.0.3 or later is needed, because older gateways cached public keys for only 1 minute and overloaded the key endpoint.
Known issues: none. The release was tested against the HSM in staging for a week before production.""",
    ),
    # --- base images ---
    (
        "base-tarnjvm-21-r3",
        "Base image notes: tarnjvm-21-r3",
        """Base image notes: tarnjvm-21-r3 (Team Lantern)
Runtime: JDK 21.0.4.
OS layer: Tarnix 9.2.
OpenSSL: 3.0.14.
Published: 2025-11-03. End of life: 2027-03-31.
Runs as the non-root user uid 10001. The CA bundle is refreshed monthly by rebuilding the image with the same tag suffix and a new digest. Default JVM flags: container-aware heap sizing at 75% of the memory limit, G1 garbage collector. Successor of tarnjvm-17-r9; services moving from 17 should read the JDK 21 migration notes in #lantern-platform, in particular about removed security manager support.""",
    ),
    (
        "base-tarnjvm-17-r9",
        "Base image notes: tarnjvm-17-r9",
        """Base image notes: tarnjvm-17-r9 (Team Lantern)
Runtime: JDK 17.0.12.
OS layer: Tarnix 8.7.
OpenSSL: 1.1.1w.
Published: 2024-08-19. End of life: 2026-06-30.
Runs as the non-root user uid 10001. No further revisions will be published: Tarnix 8.7 and OpenSSL 1.1.1 no longer receive security fixes. Successor: tarnjvm-21-r3. Services still on this image after its end of life need a waiver under POL-020 or must move within the grace period the policy allows. Lantern rebuilds it only for critical fixes, on request.""",
    ),
    (
        "base-tarnpy-3.11-r7",
        "Base image notes: tarnpy-3.11-r7",
        """Base image notes: tarnpy-3.11-r7 (Team Lantern)
Runtime: CPython 3.11.9.
OS layer: Tarnix 9.2.
OpenSSL: 3.0.14.
Published: 2025-09-22. End of life: 2027-10-31.
Runs as the non-root user uid 10001. Includes pip, a wheel cache of the company's common packages and the internal package index configuration. Time zone data and locales for the four customer languages are included. Build-time compilers are in the separate tarnpy-3.11-r7-build image; the runtime image has none, so wheels with C extensions must be built in the build image and copied into the runtime stage.""",
    ),
    (
        "base-tarnpy-3.12-r2",
        "Base image notes: tarnpy-3.12-r2",
        """Base image notes: tarnpy-3.12-r2 (Team Lantern)
Runtime: CPython 3.12.4.
OS layer: Tarnix 9.2.
OpenSSL: 3.0.14.
Published: 2026-01-15. End of life: 2028-10-31.
Runs as the non-root user uid 10001. Time zone data and locales match the 3.11 line. Like the 3.11 line, compilers live only in the matching -build image. Python 3.12 removed the distutils module; services that still import it must switch to setuptools before moving to this image. Lantern recommends this image for new Python services and will publish a 3.13 line in 2027.""",
    ),
    (
        "base-tarngo-1.22-r5",
        "Base image notes: tarngo-1.22-r5",
        """Base image notes: tarngo-1.22-r5 (Team Lantern)
Runtime: Go 1.22.6 toolchain in the build stage; the runtime stage holds only the static binary.
OS layer: Tarnix 9.1 (minimal).
OpenSSL: none; TLS comes from Go's standard library.
Published: 2025-08-05. End of life: 2026-12-31.
Runs as the non-root user uid 10001. The minimal OS layer has no shell; debug with an ephemeral debug container instead of exec. A tarngo-1.23 line is planned for the first quarter of 2027. Binaries must be built with CGO disabled.""",
    ),
    (
        "base-tarnnode-20-r2",
        "Base image notes: tarnnode-20-r2",
        """Base image notes: tarnnode-20-r2 (Team Lantern)
Runtime: Node.js 20.15.1.
OS layer: Tarnix 9.0.
OpenSSL: 3.0.13.
Published: 2024-07-30. End of life: 2026-04-30.
Runs as the non-root user uid 10001. The image ships npm but no yarn, and sets NODE_ENV to production by default. After the end of life no security fixes are published for this image; its successor, tarnnode-22-r1, is in preparation. Services still on this image after its end of life fall under POL-020. Native addons must be rebuilt when moving to Node.js 22.""",
    ),
    # --- policies ---
    (
        "pol-change-freeze",
        "POL-007: Change freeze policy",
        """POL-007: Change freeze policy (owner: Team Lantern)
Two freeze windows apply to production deploys:
1. Peak Week: the seven days starting on the Monday before the last Friday of November.
2. The December freeze: 18 December to 2 January inclusive.
During a freeze no production deploy may start.
Exceptions:
(a) Tier-3 services are exempt from the Peak Week freeze. They are not exempt from the December freeze.
(b) A fix for a security issue rated critical by the security team may be deployed during either freeze, with the approval of the current incident commander.
(c) A feature-flag change that ships no new code may be applied during either freeze with one approver from the owning team.
A service's tier is written on its service card. There is no other exception and no waiver process for freezes; a deploy started during a freeze without an exception is rolled back.""",
    ),
    (
        "pol-deploy-approval",
        "POL-011: Production deploy approval",
        """POL-011: Production deploy approval (owner: Team Lantern)
Every production deploy needs approval in Slipway before it starts. The number of approvers depends on the service's tier, as written on its service card:
- tier-1: two approvers, one engineer from the owning team and one from Team Lantern.
- tier-2: one approver from the owning team.
- tier-3: the author may approve their own deploy.
Exception: during an active SEV-1 incident, a hotfix for the service at fault needs only the approval of the incident commander, whatever the tier of the service. The deploy must be linked to the incident ticket, and the usual approvers review it within two working days.
Configuration changes, feature flags included, follow the same rules as code. Approvals expire after 24 hours.""",
    ),
    (
        "pol-secret-rotation",
        "POL-015: Secret rotation",
        """POL-015: Secret rotation (owner: Team Lantern)
Every service secret (database passwords, API keys, client certificates) is rotated at least every 90 days.
Exceptions:
- Kettlemq broker credentials are rotated every 30 days, because one leaked credential can read every queue the service subscribes to.
- Signing keys held in the Vaultwick HSM are rotated every 365 days; the HSM never exports them, which limits the risk of a leak.
Lantern's rotator rotates database and broker credentials automatically, for every secret stored under the standard paths of the secret store. HSM key rotation is manual; follow the signing key rotation runbook. A missed rotation is handled as a SEV-3 incident unless the secret has already expired, which makes it at least a SEV-2.""",
    ),
    (
        "pol-base-image-lifecycle",
        "POL-020: Base image lifecycle",
        """POL-020: Base image lifecycle (owner: Team Lantern)
Services must run on a supported base image of the tarn* family published by Team Lantern. When a base image reaches the end-of-life date given in its image notes, every service using it must move to a supported image within 30 days.
Exception: a tier-2 or tier-3 service may be granted a waiver, signed by the platform lead, to keep its image for at most 120 days after the end-of-life date. Tier-1 services are never granted waivers.
Active waivers (the waiver register):
- WVR-0031: hollowcrate on tarnjvm-17-r9, expires 2026-10-28.
No other waiver is active. A service past the grace period without a waiver is reported to its engineering manager every week until it moves, and its deploys are blocked in Slipway except for the move itself.""",
    ),
    (
        "pol-data-retention",
        "POL-023: Data retention",
        """POL-023: Data retention (owner: Team Lantern, with the legal department)
Default retention:
- application logs: 30 days;
- distributed traces: 7 days;
- Kettlemq messages: 3 days; messages on dead-letter queues: 14 days;
- incident timelines and postmortems: kept indefinitely.
Exception: services that handle payment data (marked "Handles payment data: yes" on their service card) keep their audit logs for 7 years in the finance archive. Their application logs and traces still follow the default retention; only audit log records (who changed which amount, when) are archived.
Deleting data earlier than these periods needs the legal department's approval; keeping it longer needs a documented reason in the service's card.""",
    ),
    (
        "pol-paging",
        "POL-026: Paging and severities",
        """POL-026: Paging and severities (owner: Team Lantern)
Severities: SEV-1, a customer-facing outage or data loss; SEV-2, degraded service for customers; SEV-3, no customer impact.
Pages go through Bellhop. A SEV-1 or SEV-2 alert pages the owning team's primary on-call. If nobody acknowledges within 5 minutes, the page goes to the secondary on-call; after 15 minutes, to the team's escalation manager.
Exception: for tier-3 services, SEV-2 alerts page only during the owning team's working hours; outside them, the alert waits until the next working day starts. SEV-1 alerts page at any hour for every tier.
SEV-3 alerts never page; they open a ticket for the owning team. The incident commander for a SEV-1 is the first responder until someone from the incident commander rota takes over.""",
    ),
    # --- on-call handbooks ---
    (
        "oncall-kestrel",
        "On-call handbook: Team Kestrel",
        """On-call handbook: Team Kestrel
Rotations in Bellhop: kestrel-primary and kestrel-secondary, one week each.
Handover: Monday 10:00 Europe/Lisbon, in #kestrel-pay, with a written summary of open alerts.
Escalation manager: Piet Oyelaran.
Services covered: ledgerbird and quillgate.
First steps for a page: acknowledge in Bellhop, open the service dashboard, post in #kestrel-pay that you are on it. For settlement backlogs use the payments settlement backlog runbook; for gateway errors the gateway 5xx spikes runbook. The card acquirer's status page and support line are pinned in #kestrel-pay. Never roll back ledgerbird without checking which database migration the running release needed.""",
    ),
    (
        "oncall-heron",
        "On-call handbook: Team Heron",
        """On-call handbook: Team Heron
Rotations in Bellhop: heron-primary and heron-secondary, one week each.
Handover: Monday 10:00 America/Toronto, in #heron-routes.
Escalation manager: Ruth Calloway.
Services covered: parcelpath and hollowcrate.
First steps for a page: acknowledge in Bellhop, check whether the night planning run is still going (most parcelpath alerts between 01:00 and 04:00 are slow planning runs), then open the dashboard of the alerting service. Stock sync alerts: use the stock sync lag runbook. Depot managers may call the on-call phone directly during Peak Week; log every call in the channel.""",
    ),
    (
        "oncall-osprey",
        "On-call handbook: Team Osprey",
        """On-call handbook: Team Osprey
Rotations in Bellhop: osprey-primary and osprey-secondary, one week each.
Handover: Wednesday 09:00 Asia/Singapore, in #osprey-print.
Escalation manager: Amadou Brightwater.
Services covered: stampmill and driftmark.
First steps for a page: acknowledge in Bellhop and open the dashboard. Label printing failures: use the label printing failures runbook, and call the depot if a whole depot stopped printing. Notification delays: use the notification delays runbook; the SMS and email providers' support contacts are pinned in #osprey-print. driftmark is tier-3, so most of its alerts reach you only during working hours.""",
    ),
    (
        "oncall-wren",
        "On-call handbook: Team Wren",
        """On-call handbook: Team Wren
Rotations in Bellhop: wren-primary and wren-secondary, one week each.
Handover: Monday 09:30 Europe/Berlin, in #wren-billing.
Escalation manager: Solveig Padmore.
Services covered: tallyvane and sablekey.
First steps for a page: acknowledge in Bellhop and open the dashboard. Invoice problems close to month end go to the finance duty officer as well. Anything involving sablekey's signing keys needs a second Wren engineer; wake the secondary rather than working alone. Token verification errors reported by quillgate usually mean a key rotation was only half completed: see the signing key rotation runbook.""",
    ),
    # --- runbooks ---
    (
        "rb-pay-settle-backlog",
        "Runbook: payments settlement backlog",
        """Runbook: payments settlement backlog (ledgerbird)
Alert: pay-settle-depth above 50,000 messages for 10 minutes.
1. Open ledgerbird-overview and check consumer lag and the acquirer's error rate. If the acquirer is failing, this is not a backlog problem: follow the acquirer outage section of the Kestrel handbook.
2. Scale ledgerbird to 12 replicas (it normally runs 8) with Slipway's scale command; scaling needs no deploy approval.
3. Check replication lag on Gravelbase cluster gb-pay-03. Above 30 seconds, page Team Lantern's database on-call.
4. If pay-settle-dlq holds more than 500 messages, stop and page kestrel-secondary: settlements are failing, not just slow.
5. When the depth is below 5,000, scale back to the manifest's replica count.""",
    ),
    (
        "rb-gateway-5xx",
        "Runbook: gateway 5xx spikes",
        """Runbook: gateway 5xx spikes (quillgate)
Alert: more than 2% of public API responses are 5xx for 5 minutes.
1. Open quillgate-edge and split the errors by upstream service. If one upstream dominates, page its owning team and stop here.
2. If the errors come from quillgate itself, check evictions on Cinderstore cluster cs-edge-01: evicted rate-limit counters make quillgate reject callers.
3. Turn on the feature flag gw.shed_load to drop anonymous traffic first; this is a flag change, not a deploy.
4. Check sablekey's token error rate; a spike means a half-finished key rotation.
5. Turn gw.shed_load off again once the error rate has been below 0.5% for 15 minutes, and write down the times in the incident channel.""",
    ),
    (
        "rb-label-failures",
        "Runbook: label printing failures",
        """Runbook: label printing failures (stampmill)
Alert: more than 5% of label jobs fail for 10 minutes, or a depot reports that nothing prints.
1. Check label-jobs-depth and stampmill-render. If renders succeed but depots do not print, the problem is between printer-bridge and the printers.
2. Restart the printer-bridge sidecar of one replica at a time; restarts drop printer connections for about ten seconds.
3. If the failing printers only speak EPL, set labels.epl_fallback=true in the stampmill config; this flag was added after INC-2342 and renders EPL labels through the old engine.
4. Check memory on Cinderstore cluster cs-label-02; when it is full, rendered labels are evicted and re-rendered, which multiplies the load.
5. Tell the depot managers in the depot channel when printing resumes.""",
    ),
    (
        "rb-stock-sync-lag",
        "Runbook: stock sync lag",
        """Runbook: stock sync lag (hollowcrate)
Alert: stock-sync-lag above 15 minutes.
1. Check whether a hollowcrate rollout is in progress; the alert is silenced during rollouts, but a stuck rollout can keep consumers paused.
2. Check the consumer lag of hollowcrate on route-events-q. If route events pile up, hollowcrate is slow; if they do not, hollowcrate is not publishing on stock-sync-q.
3. Restart hollowcrate's consumers one replica at a time.
4. Check slow queries on Gravelbase cluster gb-stock-02; depots with many shelves caused this before.
5. If stock counts are wrong after recovery, do not fix them by hand: run the stock reconciliation job for the affected depots and tell Team Heron in #heron-routes.""",
    ),
    (
        "rb-signing-key-rotation",
        "Runbook: signing key rotation",
        """Runbook: signing key rotation (sablekey)
When: once a year, as POL-015 requires for HSM-held keys, or at once if a key may be compromised.
Who: two Wren engineers, both present for every step (four-eyes rule).
1. Create the new signing key inside the HSM partition named in ADR-019; the key never leaves the HSM.
2. Add the new key id to the sablekey config as "next"; deploy sablekey.
3. Wait until quillgate has fetched the new public key (at most 10 minutes with quillgate 7.0.3).
4. Switch "current" to the new key id; deploy sablekey again. The previous key stays listed for 24 hours.
5. After 24 hours, disable the old key in the HSM and record the rotation in the secret register.""",
    ),
    (
        "rb-notify-delay",
        "Runbook: notification delays",
        """Runbook: notification delays (driftmark)
Alert: the median time from route event to customer message above 10 minutes.
1. Check notify-fanout-q depth. A deep fan-out queue with idle workers points to the providers; a shallow one with old route events points to driftmark's subscriptions.
2. Check the SMS gateway's and email relay's status pages (links in #osprey-print).
3. Check that driftmark's Kettlemq credentials have not expired: since INC-2360 the credential's expiry date is on the driftmark dashboard.
4. Restart driftmark's subscribers if they stopped after a broker failover.
5. Do not replay old notifications by hand: customers receive every replayed message. Ask Team Osprey's lead before any replay.""",
    ),
    # --- incident postmortems ---
    (
        "pm-inc-2291",
        "Postmortem INC-2291: payments settlement backlog",
        """Postmortem INC-2291: payments settlement backlog
Severity: SEV-2. Date: 2026-02-11. Duration: 94 minutes.
Incident commander: Bex Arlington.
Impact: settlement confirmations were delayed by up to 70 minutes; invoices stayed unpaid in tallyvane and customers received payment receipts late.
Root cause: ledgerbird 4.11.2 settled in batches of 200, and a missing index on gb-pay-03 made each batch slow under month-start load. The pay-settle-q depth reached 180,000 messages.
Resolution: the on-call scaled ledgerbird up as the runbook describes; the backlog cleared in 50 minutes.
Follow-up: ledgerbird 4.12.0 adds the missing index with migration 0042 and raises the batch size. Action items are owned by Ines Marrowby.""",
    ),
    (
        "pm-inc-2317",
        "Postmortem INC-2317: public API errors",
        """Postmortem INC-2317: public API errors
Severity: SEV-1. Date: 2026-03-29. Duration: 41 minutes.
Incident commander: Oren Saltmarsh.
Impact: about 30% of public API calls failed with 429 or 503 responses; depot scanners retried and made it worse.
Root cause: a memory limit change on Cinderstore cluster cs-edge-01 made it evict the gateway's rate-limit counters. quillgate treats a missing counter as an exhausted limit, so it rejected callers that were well within their limits.
Resolution: the memory limit was restored and gw.shed_load was turned on for 25 minutes.
Action items: Team Lantern alerts on cs-edge-01 evictions; Team Kestrel makes quillgate fail open when counters are missing (planned for quillgate 7.1).""",
    ),
    (
        "pm-inc-2342",
        "Postmortem INC-2342: labels not printing in tw-east-2 depots",
        """Postmortem INC-2342: labels not printing in tw-east-2 depots
Severity: SEV-2. Date: 2026-04-10. Duration: 3 hours 20 minutes.
Incident commander: Priya Thistlewood.
Impact: forty depot printers in the tw-east-2 region printed no labels during the morning shift; parcels left without labels were held back a day.
Root cause: stampmill 3.0.0 removed EPL label output, and the printers in those depots only speak EPL. The release notes said so, but nobody had checked which depots still had EPL printers.
Resolution: a new config flag, labels.epl_fallback, renders EPL labels through the old engine; it was turned on for the affected depots.
Action items: replace the EPL printers by the end of the third quarter; add a printer model check to stampmill's release checklist.""",
    ),
    (
        "pm-inc-2360",
        "Postmortem INC-2360: customer notifications delayed",
        """Postmortem INC-2360: customer notifications delayed
Severity: SEV-2. Date: 2026-05-19. Duration: 6 hours 5 minutes.
Incident commander: Lucan Ferris.
Impact: "out for delivery" and "delivered" messages arrived up to six hours late; payment receipts were not affected because they are sent in a separate nightly batch.
Root cause: driftmark's Kettlemq broker credentials expired. Lantern's rotator skipped them because driftmark stored the secret under a legacy path instead of kmq/driftmark, so nobody noticed the approaching expiry.
Resolution: the credentials were rotated by hand and the subscribers restarted.
Action items: move the secret to kmq/driftmark; show the credential's expiry date on the driftmark dashboard; the rotator reports secrets outside the standard paths.""",
    ),
    (
        "pm-inc-2388",
        "Postmortem INC-2388: stock counts drifting",
        """Postmortem INC-2388: stock counts drifting
Severity: SEV-3. Date: 2026-07-02. Duration: 2 days until all counts were reconciled.
Incident commander: Agnes Holloway.
Impact: stock counts in eleven depots showed parcels that had already left; no customer saw wrong data, but depot staff searched for parcels that were not there.
Root cause: after a broker failover on Kettlemq cluster kmq-core-1, route-events-q redelivered about 9,000 "delivered" events. hollowcrate processed them twice because it does not de-duplicate route events.
Resolution: the stock reconciliation job was run for the affected depots.
Action items: hollowcrate 2.0 consumes route events idempotently, using the depot id and event id as key.""",
    ),
    # --- architecture decision records ---
    (
        "adr-014-kettlemq",
        "ADR-014: Use Kettlemq as the message broker",
        """ADR-014: Use Kettlemq as the message broker
Status: accepted (2024-05-14).
Context: services exchanged events through HTTP callbacks. Every team wrote its own retries, and a slow consumer slowed down the producer.
Options considered: Kettlemq, run by Team Lantern; a managed event log from a cloud vendor; keeping the callbacks with a shared retry library.
Decision: Kettlemq. Each queue has exactly one owning service, which publishes to it; any service may consume. Lantern runs the clusters, and each service connects with its own credentials.
Consequences: producers no longer wait for consumers; dead-letter queues collect messages that keep failing; retry behaviour is specified separately in ADR-027. Lantern needs one more on-call engineer for the broker clusters.""",
    ),
    (
        "adr-019-hsm",
        "ADR-019: Keep signing keys in the Vaultwick HSM",
        """ADR-019: Keep sablekey's signing keys in the Vaultwick HSM
Status: accepted (2025-01-22).
Context: sablekey's signing keys were files in the secret store; anyone who could read the secret could mint session tokens for any customer.
Decision: generate the keys inside HSM partition hsm-p2 of the Vaultwick HSM in tw-north-1 and never export them. sablekey asks the HSM for every signature.
Consequences: sablekey runs only in tw-north-1, next to the HSM. Each signature costs about 3 ms more. Keys cannot be rotated by the automatic rotator; rotation becomes a yearly manual procedure for two people, which POL-015 allows as an exception to its 90-day rule.""",
    ),
    (
        "adr-022-gravelbase",
        "ADR-022: hollowcrate stores stock in Gravelbase",
        """ADR-022: hollowcrate stores stock in Gravelbase
Status: accepted (2025-06-10).
Context: hollowcrate kept stock counts in Cinderstore, a key-value store without transactions. Moving a parcel between depots updated two keys, and a crash between the two writes left the parcel in both depots or in neither.
Options considered: Cinderstore with a write-ahead log of our own; Gravelbase, the relational database run by Team Lantern.
Decision: Gravelbase, cluster gb-stock-02. A move between depots is one transaction.
Consequences: stock queries became slower for depots with many shelves and need indexes; Cinderstore remains in use only as a cache.""",
    ),
    (
        "adr-027-retries",
        "ADR-027: Retries and dead-letter queues",
        """ADR-027: Retries and dead-letter queues
Status: accepted (2025-03-03).
Context: after ADR-014 each team configured Kettlemq redelivery differently; some consumers retried forever and blocked their queues.
Decision: consumers retry with exponential backoff starting at 2 seconds and doubling each time, with at most 6 delivery attempts. After the last attempt the message moves to the queue's dead-letter queue, named after the queue with the suffix -dlq instead of -q. Consumers must be idempotent, because a message can be delivered more than once.
Consequences: every owning service needs an alert on its dead-letter queue; retention for dead-letter messages is set in POL-023.""",
    ),
    (
        "adr-031-base-images",
        "ADR-031: One family of base images",
        """ADR-031: One family of base images
Status: accepted (2024-09-30).
Context: services were built on a dozen different public images; nobody knew which ones had known vulnerabilities, and patching meant chasing every team.
Decision: all services build on Team Lantern's tarn* images: tarnjvm for Java, tarnpy for Python, tarngo for Go and tarnnode for Node.js. Each image revision gets notes with its runtime, OS layer, OpenSSL version and an end-of-life date.
Consequences: Lantern rebuilds the images when a fix is published and announces end-of-life dates ahead; services must follow POL-020. The release notes of every service release name the base image it was built on.""",
    ),
    # --- configuration ---
    (
        "cfg-ledgerbird",
        "Config: ledgerbird production overrides",
        """Config: ledgerbird production overrides (config map ledgerbird-prod)
settle_batch_size: 300 (overrides the release default; raised after load tests in April 2026)
acquirer_timeout_ms: 4000
dlq_alert_threshold: 500
idempotency_window_hours: 48
acquirer_endpoint: the production endpoint pinned in the secret store
Notes: values not listed here use the defaults of the running release. Changing this map is a configuration change under POL-011 and needs the same approvals as a deploy of ledgerbird. Keep the DLQ threshold equal to the one in the payments settlement backlog runbook.""",
    ),
    (
        "cfg-quillgate",
        "Config: quillgate rate limits",
        """Config: quillgate rate limits (config map quillgate-prod)
per API key: 600 requests per minute, bursts of twice that for 10 seconds
anonymous callers: 60 requests per minute per IP address
counter store: Cinderstore cluster cs-edge-01, counters expire after 120 seconds
feature flags:
  gw.shed_load: off by default; when on, anonymous callers are rejected first
  gw.fail_open_counters: not yet available (planned for quillgate 7.1)
Notes: depot scanners use API keys with a raised limit of 3,000 requests per minute, listed in the partner-keys table. Limit changes are configuration changes under POL-011.""",
    ),
    (
        "cfg-driftmark",
        "Config: driftmark providers",
        """Config: driftmark providers (config map driftmark-prod)
email: the internal mail relay mailhop, sender address notifications@tarnwick.example
sms: the Chirpwell gateway, sender id TARNWICK
limits: at most 3 SMS per parcel per day; no SMS during quiet hours, 21:00-08:00 in the customer's local time
languages: English, French, German and Dutch templates; the customer's language is taken from the invoice or the parcel
retry: provider errors are retried as ADR-027 describes
Notes: switching SMS providers needs the legal department's approval, because the provider processes phone numbers. Template changes go through Team Osprey.""",
    ),
]

# --- the probes -------------------------------------------------------------------------------
# Each: question, answers, answer_type, kind, hops, steps [(doc id, quoted text), ...].


def P(question, answers, kind, hops, steps, answer_type="single"):
    return {
        "question": question,
        "answers": answers,
        "answer_type": answer_type,
        "kind": kind,
        "hops": hops,
        "steps": steps,
    }


PROBES: list[dict] = [
    # --- one step ---
    P(
        "Which image tag does ledgerbird run in production?",
        ["4.12.0", "ledgerbird:4.12.0", "v4.12.0"],
        "lookup",
        1,
        [("deploy-ledgerbird", "image: registry.tarnwick.internal/ledgerbird:4.12.0")],
    ),
    P(
        "How many delivery attempts does a Kettlemq consumer make at most before a message moves to the "
        "dead-letter queue?",
        ["6", "six", "6 attempts"],
        "lookup",
        1,
        [("adr-027-retries", "with at most 6 delivery attempts")],
    ),
    P(
        "To how many replicas should ledgerbird be scaled when the payments settlement queue backs up?",
        ["12", "twelve", "12 replicas"],
        "lookup",
        1,
        [("rb-pay-settle-backlog", "Scale ledgerbird to 12 replicas")],
    ),
    P(
        "Who was the incident commander when Cinderstore evicted the API gateway's rate-limit counters?",
        ["Oren Saltmarsh"],
        "incident",
        1,
        [("pm-inc-2317", "Incident commander: Oren Saltmarsh")],
    ),
    P(
        "How long are messages on Kettlemq dead-letter queues kept?",
        ["14 days", "fourteen days"],
        "lookup",
        1,
        [("pol-data-retention", "messages on dead-letter queues: 14 days")],
    ),
    P(
        "What settle batch size does ledgerbird use in production?",
        ["300"],
        "lookup",
        1,
        [("cfg-ledgerbird", "settle_batch_size: 300 (overrides the release default")],
    ),
    P(
        "Through which SMS gateway does driftmark send text messages?",
        ["Chirpwell", "the Chirpwell gateway"],
        "lookup",
        1,
        [("cfg-driftmark", "sms: the Chirpwell gateway")],
    ),
    P(
        "When is Team Heron's weekly on-call handover?",
        ["Monday 10:00 America/Toronto", "Monday 10:00", "Monday at 10:00"],
        "lookup",
        1,
        [("oncall-heron", "Handover: Monday 10:00 America/Toronto")],
    ),
    P(
        "Which queues does the Kettlemq cluster kmq-core-2 host?",
        ["pay-settle-q", "pay-settle-dlq", "invoice-out-q"],
        "lookup",
        1,
        [("plat-kettlemq-clusters", "kmq-core-2 (tw-north-1): pay-settle-q, pay-settle-dlq, invoice-out-q")],
        answer_type="set",
    ),
    P(
        "If nobody acknowledges a SEV-1 page, after how many minutes does it go to the secondary on-call?",
        ["5 minutes", "5", "five minutes"],
        "lookup",
        1,
        [("pol-paging", "If nobody acknowledges within 5 minutes, the page goes to the secondary on-call")],
    ),
    P(
        "Which OpenSSL version ships in the base image tarnjvm-17-r9?",
        ["1.1.1w", "OpenSSL 1.1.1w"],
        "lookup",
        1,
        [("base-tarnjvm-17-r9", "OpenSSL: 1.1.1w.")],
    ),
    P(
        "May a fix for a critical security issue be deployed to production during the December freeze?",
        ["yes"],
        "policy-exception",
        1,
        [
            (
                "pol-change-freeze",
                "(b) A fix for a security issue rated critical by the security team may be deployed during "
                "either freeze",
            )
        ],
        answer_type="yes_no",
    ),
    P(
        "Which services does Team Heron own?",
        ["parcelpath", "hollowcrate"],
        "lookup",
        1,
        [("team-heron", "parcelpath (route planning) and hollowcrate (warehouse inventory)")],
        answer_type="set",
    ),
    P(
        "During an active SEV-1 incident caused by quillgate, does a hotfix to quillgate need two approvers?",
        ["no"],
        "policy-exception",
        1,
        [
            (
                "pol-deploy-approval",
                "a hotfix for the service at fault needs only the approval of the incident commander, whatever "
                "the tier of the service",
            )
        ],
        answer_type="yes_no",
    ),
    P(
        "Which feature flag does the gateway 5xx runbook tell you to turn on?",
        ["gw.shed_load"],
        "lookup",
        1,
        [("rb-gateway-5xx", "Turn on the feature flag gw.shed_load")],
    ),
    P(
        "Which datastore did ADR-022 choose for hollowcrate's stock counts?",
        ["Gravelbase", "gb-stock-02"],
        "lookup",
        1,
        [("adr-022-gravelbase", "Decision: Gravelbase, cluster gb-stock-02.")],
    ),
    P(
        "How long do session tokens issued by sablekey 0.14.2 live?",
        ["15 minutes", "fifteen minutes"],
        "lookup",
        1,
        [("rel-sablekey-0.14.2", "Session tokens now live 15 minutes instead of 30.")],
    ),
    P(
        "Which services consume the payments settlement queue?",
        ["tallyvane", "driftmark"],
        "aggregation",
        1,
        [
            ("svc-tallyvane", "It consumes pay-settle-q"),
            ("svc-driftmark", "It consumes route-events-q and pay-settle-q."),
        ],
        answer_type="set",
    ),
    P(
        "Which services consume the route events queue?",
        ["hollowcrate", "stampmill", "driftmark"],
        "aggregation",
        1,
        [
            ("svc-hollowcrate", "It consumes route-events-q"),
            ("svc-stampmill", "It consumes route-events-q"),
            ("svc-driftmark", "It consumes route-events-q and pay-settle-q."),
        ],
        answer_type="set",
    ),
    # --- two steps ---
    P(
        "Which chat channel reaches the team that owns the stock sync queue?",
        ["#heron-routes", "heron-routes"],
        "multi-hop",
        2,
        [
            ("svc-hollowcrate", "stock-sync-q, the stock sync queue, which hollowcrate owns"),
            ("svc-hollowcrate", "Owner: Team Heron."),
            ("team-heron", "Chat channel: #heron-routes."),
        ],
    ),
    P(
        "Who leads the team that owns the invoice outbox queue?",
        ["Dmitri Ashgrove"],
        "multi-hop",
        2,
        [
            ("svc-tallyvane", "invoice-out-q, the invoice outbox queue, which tallyvane owns"),
            ("svc-tallyvane", "Owner: Team Wren."),
            ("team-wren", "Team lead: Dmitri Ashgrove."),
        ],
    ),
    P(
        "Which Kettlemq cluster hosts the queue that driftmark owns?",
        ["kmq-edge-1"],
        "multi-hop",
        2,
        [
            ("svc-driftmark", "notify-fanout-q, the notification fan-out queue, which driftmark owns"),
            ("plat-kettlemq-clusters", "kmq-edge-1 (tw-east-2): notify-fanout-q."),
        ],
    ),
    P(
        "How many replicas does the service that owns the route events queue run in production?",
        ["6", "six", "6 replicas"],
        "multi-hop",
        2,
        [
            ("svc-parcelpath", "route-events-q, the route events queue, which parcelpath owns"),
            ("deploy-parcelpath", "replicas: 6"),
        ],
    ),
    P(
        "Which base image is the ledgerbird release that fixed the root cause of INC-2291 built on?",
        ["tarnjvm-21-r3"],
        "version-chain",
        2,
        [
            ("pm-inc-2291", "ledgerbird 4.12.0 adds the missing index with migration 0042"),
            ("rel-ledgerbird-4.12.0", "Base image: tarnjvm-21-r3"),
        ],
    ),
    P(
        "Which team owns the service whose release caused INC-2342?",
        ["Team Osprey", "Osprey"],
        "incident",
        2,
        [
            ("pm-inc-2342", "stampmill 3.0.0 removed EPL label output"),
            ("svc-stampmill", "Owner: Team Osprey."),
        ],
    ),
    P(
        "How often must the kind of credential that expired in INC-2360 be rotated?",
        ["every 30 days", "30 days", "every thirty days"],
        "policy-exception",
        2,
        [
            ("pm-inc-2360", "driftmark's Kettlemq broker credentials expired"),
            ("pol-secret-rotation", "Kettlemq broker credentials are rotated every 30 days"),
        ],
    ),
    P(
        "Which ADR chose the message broker that carries the payments settlement queue?",
        ["ADR-014"],
        "multi-hop",
        2,
        [
            ("svc-ledgerbird", "Both queues are Kettlemq queues"),
            ("adr-014-kettlemq", "ADR-014: Use Kettlemq as the message broker"),
        ],
    ),
    P(
        "In which HSM partition does the token-signing service keep its signing keys?",
        ["hsm-p2"],
        "multi-hop",
        2,
        [
            ("svc-sablekey", "sablekey is the token-signing service"),
            ("svc-sablekey", "as decided in ADR-019"),
            ("adr-019-hsm", "generate the keys inside HSM partition hsm-p2"),
        ],
    ),
    P(
        "Can driftmark ship a routine release to production during Peak Week?",
        ["yes"],
        "policy-exception",
        2,
        [
            ("svc-driftmark", "Tier: tier-3."),
            ("pol-change-freeze", "(a) Tier-3 services are exempt from the Peak Week freeze."),
        ],
        answer_type="yes_no",
    ),
    P(
        "Can the service that owns the route events queue ship a routine release to production during Peak Week?",
        ["no"],
        "policy-exception",
        2,
        [
            ("svc-parcelpath", "route-events-q, the route events queue, which parcelpath owns"),
            ("svc-parcelpath", "Tier: tier-1."),
            ("pol-change-freeze", "During a freeze no production deploy may start."),
        ],
        answer_type="yes_no",
    ),
    P(
        "Can driftmark ship a routine release to production during the December freeze?",
        ["no"],
        "policy-exception",
        2,
        [
            ("svc-driftmark", "Tier: tier-3."),
            ("pol-change-freeze", "They are not exempt from the December freeze."),
        ],
        answer_type="yes_no",
    ),
    P(
        "Does a routine production deploy of stampmill need an approver from Team Lantern?",
        ["no"],
        "policy-exception",
        2,
        [
            ("svc-stampmill", "Tier: tier-2."),
            ("pol-deploy-approval", "tier-2: one approver from the owning team."),
        ],
        answer_type="yes_no",
    ),
    P(
        "Does a routine production deploy of the token-signing service need an approver from Team Lantern?",
        ["yes"],
        "policy-exception",
        2,
        [
            ("svc-sablekey", "Tier: tier-1."),
            (
                "pol-deploy-approval",
                "tier-1: two approvers, one engineer from the owning team and one from Team Lantern.",
            ),
        ],
        answer_type="yes_no",
    ),
    P(
        "Could ledgerbird be granted a waiver to keep running a base image past its end-of-life date?",
        ["no"],
        "policy-exception",
        2,
        [
            ("svc-ledgerbird", "Tier: tier-1."),
            ("pol-base-image-lifecycle", "Tier-1 services are never granted waivers."),
        ],
        answer_type="yes_no",
    ),
    P(
        "Is the service that owns the stock sync queue covered by an active base image waiver?",
        ["yes"],
        "policy-exception",
        2,
        [
            ("svc-hollowcrate", "stock-sync-q, the stock sync queue, which hollowcrate owns"),
            ("pol-base-image-lifecycle", "WVR-0031: hollowcrate on tarnjvm-17-r9, expires 2026-10-28."),
        ],
        answer_type="yes_no",
    ),
    P(
        "Until which date may the service that owns the stock sync queue keep its current base image?",
        ["2026-10-28"],
        "policy-exception",
        2,
        [
            ("svc-hollowcrate", "stock-sync-q, the stock sync queue, which hollowcrate owns"),
            ("pol-base-image-lifecycle", "WVR-0031: hollowcrate on tarnjvm-17-r9, expires 2026-10-28."),
        ],
    ),
    P(
        "How long must the service that owns the invoice outbox queue keep its audit logs?",
        ["7 years", "seven years"],
        "policy-exception",
        2,
        [
            ("svc-tallyvane", "Handles payment data: yes."),
            ("pol-data-retention", "keep their audit logs for 7 years in the finance archive"),
        ],
    ),
    P(
        "How long are tallyvane's application logs kept?",
        ["30 days", "thirty days"],
        "policy-exception",
        2,
        [
            ("svc-tallyvane", "Handles payment data: yes."),
            ("pol-data-retention", "Their application logs and traces still follow the default retention"),
            ("pol-data-retention", "application logs: 30 days"),
        ],
    ),
    P(
        "If tallyvane has a SEV-2 alert at 03:00 Berlin time, is its on-call paged?",
        ["yes"],
        "policy-exception",
        2,
        [
            ("svc-tallyvane", "Tier: tier-2."),
            ("pol-paging", "A SEV-1 or SEV-2 alert pages the owning team's primary on-call."),
        ],
        answer_type="yes_no",
    ),
    P(
        "Which Gravelbase migration must run before deploying the ledgerbird release that is in production?",
        ["0042", "migration 0042"],
        "version-chain",
        2,
        [
            ("deploy-ledgerbird", "image: registry.tarnwick.internal/ledgerbird:4.12.0"),
            ("rel-ledgerbird-4.12.0", "run Gravelbase migration 0042"),
        ],
    ),
    P(
        "Who is the escalation manager for quillgate pages?",
        ["Piet Oyelaran"],
        "multi-hop",
        2,
        [
            ("svc-quillgate", "Owner: Team Kestrel."),
            ("oncall-kestrel", "Escalation manager: Piet Oyelaran."),
        ],
    ),
    P(
        "Which team owns the queue whose redelivered events made stock counts drift in INC-2388?",
        ["Team Heron", "Heron"],
        "incident",
        2,
        [
            ("pm-inc-2388", "route-events-q redelivered about 9,000"),
            ("svc-parcelpath", "route-events-q, the route events queue, which parcelpath owns"),
            ("svc-parcelpath", "Owner: Team Heron."),
        ],
    ),
    P(
        "Which production services run on the base image tarnpy-3.11-r7?",
        ["parcelpath", "tallyvane"],
        "aggregation",
        2,
        [
            ("rel-parcelpath-2.3.1", "Base image: tarnpy-3.11-r7."),
            ("deploy-parcelpath", "image: registry.tarnwick.internal/parcelpath:2.3.1"),
            ("rel-tallyvane-8.1.0", "Base image: tarnpy-3.11-r7."),
            ("deploy-tallyvane", "image: registry.tarnwick.internal/tallyvane:8.1.0"),
        ],
        answer_type="set",
    ),
    # --- three steps ---
    P(
        "Which base image does the service that owns the payments settlement queue run in production?",
        ["tarnjvm-21-r3"],
        "version-chain",
        3,
        [
            ("svc-ledgerbird", "pay-settle-q, the payments settlement queue, which ledgerbird owns"),
            ("deploy-ledgerbird", "image: registry.tarnwick.internal/ledgerbird:4.12.0"),
            ("rel-ledgerbird-4.12.0", "Base image: tarnjvm-21-r3"),
        ],
    ),
    P(
        "Which CPython version does parcelpath run in production?",
        ["3.11.9", "CPython 3.11.9"],
        "version-chain",
        3,
        [
            ("deploy-parcelpath", "image: registry.tarnwick.internal/parcelpath:2.3.1"),
            ("rel-parcelpath-2.3.1", "Base image: tarnpy-3.11-r7."),
            ("base-tarnpy-3.11-r7", "Runtime: CPython 3.11.9."),
        ],
    ),
    P(
        "Which CPython version does parcelpath's staging deployment run on?",
        ["3.12.4", "CPython 3.12.4"],
        "version-chain",
        3,
        [
            ("deploy-parcelpath", "image: registry.tarnwick.internal/parcelpath:2.4.0b1"),
            ("rel-parcelpath-2.4.0b1", "Base image: tarnpy-3.12-r2."),
            ("base-tarnpy-3.12-r2", "Runtime: CPython 3.12.4."),
        ],
    ),
    P(
        "Which OpenSSL version ships in the base image of hollowcrate's production release?",
        ["1.1.1w", "OpenSSL 1.1.1w"],
        "version-chain",
        3,
        [
            ("deploy-hollowcrate", "image: registry.tarnwick.internal/hollowcrate:1.9.4"),
            ("rel-hollowcrate-1.9.4", "Base image: tarnjvm-17-r9."),
            ("base-tarnjvm-17-r9", "OpenSSL: 1.1.1w."),
        ],
    ),
    P(
        "Which Node.js version does driftmark run in production?",
        ["20.15.1", "Node.js 20.15.1"],
        "version-chain",
        3,
        [
            ("deploy-driftmark", "image: registry.tarnwick.internal/driftmark:5.6.2"),
            ("rel-driftmark-5.6.2", "Base image: tarnnode-20-r2."),
            ("base-tarnnode-20-r2", "Runtime: Node.js 20.15.1."),
        ],
    ),
    P(
        "Who is the escalation manager for the service at fault in INC-2360?",
        ["Amadou Brightwater"],
        "incident",
        3,
        [
            ("pm-inc-2360", "driftmark's Kettlemq broker credentials expired"),
            ("svc-driftmark", "Owner: Team Osprey."),
            ("oncall-osprey", "Escalation manager: Amadou Brightwater."),
        ],
    ),
    P(
        "If driftmark has a SEV-2 alert at 03:00 Singapore time on a Tuesday, is its on-call paged?",
        ["no"],
        "policy-exception",
        3,
        [
            ("svc-driftmark", "Tier: tier-3."),
            ("svc-driftmark", "Owner: Team Osprey."),
            ("team-osprey", "Working hours: 09:00-18:00 on weekdays, Asia/Singapore time."),
            ("pol-paging", "for tier-3 services, SEV-2 alerts page only during the owning team's working hours"),
        ],
        answer_type="yes_no",
    ),
    P(
        "Which base images do Team Kestrel's services run in production?",
        ["tarnjvm-21-r3", "tarngo-1.22-r5"],
        "aggregation",
        3,
        [
            ("team-kestrel", "ledgerbird (payment settlement) and quillgate (the public API gateway)"),
            ("deploy-ledgerbird", "image: registry.tarnwick.internal/ledgerbird:4.12.0"),
            ("rel-ledgerbird-4.12.0", "Base image: tarnjvm-21-r3"),
            ("deploy-quillgate", "image: registry.tarnwick.internal/quillgate:7.0.3"),
            ("rel-quillgate-7.0.3", "Base image: tarngo-1.22-r5."),
        ],
        answer_type="set",
    ),
    P(
        "As of 2026-06-01, is driftmark's production base image past its end-of-life date?",
        ["yes"],
        "version-chain",
        3,
        [
            ("deploy-driftmark", "image: registry.tarnwick.internal/driftmark:5.6.2"),
            ("rel-driftmark-5.6.2", "Base image: tarnnode-20-r2."),
            ("base-tarnnode-20-r2", "End of life: 2026-04-30."),
        ],
        answer_type="yes_no",
    ),
    # --- four steps ---
    P(
        "Which JDK version runs in the production image of the service that owns the payments settlement queue?",
        ["21.0.4", "JDK 21.0.4"],
        "version-chain",
        4,
        [
            ("svc-ledgerbird", "pay-settle-q, the payments settlement queue, which ledgerbird owns"),
            ("deploy-ledgerbird", "image: registry.tarnwick.internal/ledgerbird:4.12.0"),
            ("rel-ledgerbird-4.12.0", "Base image: tarnjvm-21-r3"),
            ("base-tarnjvm-21-r3", "Runtime: JDK 21.0.4."),
        ],
    ),
    P(
        "What is the end-of-life date of the base image of the production release of the service that owns the "
        "label jobs queue?",
        ["2028-10-31"],
        "version-chain",
        4,
        [
            ("svc-stampmill", "label-jobs-q, the label jobs queue, which stampmill owns"),
            ("deploy-stampmill", "image: registry.tarnwick.internal/stampmill:3.0.0"),
            ("rel-stampmill-3.0.0", "Base image: tarnpy-3.12-r2."),
            ("base-tarnpy-3.12-r2", "End of life: 2028-10-31."),
        ],
    ),
    P(
        "Which OS layer is the production image of the token-signing service built on?",
        ["Tarnix 9.1", "9.1"],
        "version-chain",
        4,
        [
            ("svc-sablekey", "sablekey is the token-signing service"),
            ("deploy-sablekey", "image: registry.tarnwick.internal/sablekey:0.14.2"),
            ("rel-sablekey-0.14.2", "Base image: tarngo-1.22-r5."),
            ("base-tarngo-1.22-r5", "OS layer: Tarnix 9.1 (minimal)."),
        ],
    ),
    P(
        "What is the end-of-life date of the base image that Team Wren's invoicing service runs in production?",
        ["2027-10-31"],
        "version-chain",
        4,
        [
            ("team-wren", "tallyvane (invoicing)"),
            ("deploy-tallyvane", "image: registry.tarnwick.internal/tallyvane:8.1.0"),
            ("rel-tallyvane-8.1.0", "Base image: tarnpy-3.11-r7."),
            ("base-tarnpy-3.11-r7", "End of life: 2027-10-31."),
        ],
    ),
    P(
        "As of 2026-06-01, does driftmark's production base image comply with the base image lifecycle policy?",
        ["no"],
        "policy-exception",
        4,
        [
            ("deploy-driftmark", "image: registry.tarnwick.internal/driftmark:5.6.2"),
            ("rel-driftmark-5.6.2", "Base image: tarnnode-20-r2."),
            ("base-tarnnode-20-r2", "End of life: 2026-04-30."),
            ("pol-base-image-lifecycle", "must move to a supported image within 30 days"),
            ("pol-base-image-lifecycle", "No other waiver is active."),
        ],
        answer_type="yes_no",
    ),
]

# Facts the chains rely on, checked to be unambiguous across the corpus (see check()).
QUEUE_OWNERS = {
    "pay-settle-q": "ledgerbird",
    "pay-settle-dlq": "ledgerbird",
    "invoice-out-q": "tallyvane",
    "route-events-q": "parcelpath",
    "stock-sync-q": "hollowcrate",
    "label-jobs-q": "stampmill",
    "notify-fanout-q": "driftmark",
}
PRODUCTION_TAGS = {
    "ledgerbird": "4.12.0",
    "quillgate": "7.0.3",
    "parcelpath": "2.3.1",
    "hollowcrate": "1.9.4",
    "stampmill": "3.0.0",
    "driftmark": "5.6.2",
    "tallyvane": "8.1.0",
    "sablekey": "0.14.2",
}


# What the first retrieval (the question alone, BM25 top 3, the default bm25s retriever) finds, per
# hops: (probes, first document of the chain retrieved, every gold document retrieved, mean recall).
# Measured when the set was written; tests/test_engdocs.py recomputes it.
FIRST_HOP_K = 3
FIRST_HOP = {
    1: (19, 18, 16, 0.89),
    2: (24, 14, 9, 0.68),
    3: (9, 4, 0, 0.36),
    4: (5, 2, 0, 0.25),
}


# --- build, check, write ----------------------------------------------------------------------


def corpus_rows() -> list[dict]:
    return [{"id": i, "title": t, "text": x} for i, t, x in DOCS]


def probe_rows() -> list[dict]:
    rows = []
    for n, p in enumerate(PROBES, 1):
        gold = list(dict.fromkeys(doc for doc, _ in p["steps"]))
        rows.append(
            {
                "id": f"eng-{n:03d}",
                "question": p["question"],
                "answers": p["answers"],
                "answer_type": p["answer_type"],
                "gold_doc_ids": gold,
                "metadata": {
                    "hops": p["hops"],
                    "kind": p["kind"],
                    "steps": [{"doc": doc, "says": says} for doc, says in p["steps"]],
                },
            }
        )
    return rows


def words(text: str) -> int:
    return len(text.split())


def check(corpus: list[dict], probes: list[dict]) -> list[str]:
    """Consistency problems of the set, one line each (an empty list means consistent)."""
    problems = []
    docs = {}
    for d in corpus:
        if d["id"] in docs:
            problems.append(f"{d['id']}: duplicate document id")
        docs[d["id"]] = d["text"]
        if not 80 <= words(d["text"]) <= 300:
            problems.append(f"{d['id']}: {words(d['text'])} words, want 80-300")
    seen_q = set()
    for p in probes:
        pid = p["id"]
        meta = p["metadata"]
        if p["question"] in seen_q:
            problems.append(f"{pid}: duplicate question")
        seen_q.add(p["question"])
        if p["answer_type"] not in ANSWER_TYPES:
            problems.append(f"{pid}: answer_type {p['answer_type']!r}")
        if meta["kind"] not in KINDS:
            problems.append(f"{pid}: kind {meta['kind']!r}")
        if not 1 <= meta["hops"] <= 4:
            problems.append(f"{pid}: hops {meta['hops']}")
        for step in meta["steps"]:
            if step["doc"] not in docs:
                problems.append(f"{pid}: gold document {step['doc']!r} does not exist")
            elif step["says"] not in docs[step["doc"]]:
                problems.append(f"{pid}: {step['doc']!r} does not say {step['says']!r}")
        gold_text = "\n".join(docs.get(g, "") for g in p["gold_doc_ids"])
        if p["answer_type"] == "yes_no":
            if p["answers"] not in (["yes"], ["no"]):
                problems.append(f"{pid}: yes_no answers {p['answers']}")
        elif p["answer_type"] == "set":
            for item in p["answers"]:
                if item not in gold_text:
                    problems.append(f"{pid}: set item {item!r} is in none of its gold documents")
        elif p["answers"][0] not in gold_text:
            problems.append(f"{pid}: answer {p['answers'][0]!r} is in none of its gold documents")
    # Unambiguous chains: each queue is owned ("which X owns") by exactly one service card, and
    # each service's production image tag appears in exactly one deploy manifest.
    for queue, owner in QUEUE_OWNERS.items():
        q = re.escape(queue)
        owns = re.compile(rf"{q}, the [a-z -]+, which (\w+) owns|{q}, also owned by (\w+)")
        owners = [(i, "".join(m.groups(""))) for i, t in docs.items() for m in owns.finditer(t)]
        if owners != [(f"svc-{owner}", owner)]:
            problems.append(f"queue {queue}: owned according to {owners}, expected svc-{owner}")
    for service, tag in PRODUCTION_TAGS.items():
        image = f"{service}:{tag}"
        holders = [i for i, t in docs.items() if i.startswith("deploy-") and image in t]
        if holders != [f"deploy-{service}"]:
            problems.append(f"{image}: in manifests {holders}, expected deploy-{service}")
        rel = f"rel-{service}-{tag}"
        if rel not in docs:
            problems.append(f"{service}: no release notes {rel} for the production tag")
    return problems


README_TEMPLATE = """\
# engdocs: engineering docs of a fictional company

Internal engineering documents of Tarnwick Parcel Systems, a parcel delivery company that does
not exist: service cards, deploy manifests, release notes, base image notes, policies with
exceptions, on-call handbooks, runbooks, incident postmortems, architecture decision records
(ADRs), configuration notes and team pages.  The questions are the kind an engineer asks while
on call or before a deploy, where the answer unfolds over several documents and a later step
needs a fact the question never names.  For example, "Which JDK version runs in the production
image of the service that owns the payments settlement queue?" needs: the payments settlement
queue is owned by ledgerbird (its service card), ledgerbird's deploy manifest pins image tag
4.12.0, the 4.12.0 release notes say it is built on base image tarnjvm-21-r3, and that image's
notes say JDK 21.0.4.  This is the setting that motivates active retrieval (FLARE): the first
retrieval with the question finds the first document of the chain, and only the partial answer
names what to look up next.

Licence: CC0-1.0 (written for flarebench)

Everything here (company, services, teams, people, tools such as Kettlemq, Gravelbase,
Cinderstore, Slipway, Bellhop, the Vaultwick HSM, the Chirpwell SMS gateway, the tarn* base
images and the Tarnix OS layer) is invented, so a model cannot answer from memory.  Real languages
and libraries (Java, Python, Go, Node.js, OpenSSL) appear only as runtimes inside the invented
images.

## Counts

- documents: {n_docs}
- probes: {n_probes}
- documents by kind: {doc_kinds}
- words per document: min {w_min}, median {w_med}, max {w_max}
- by answer_type: {by_type}
- by hops: {by_hops}
- by kind: {by_kind}
- gold documents per probe: min {g_min}, median {g_med}, max {g_max}

## Retrieval difficulty

What a single retrieval with the question finds (BM25 as flarebench's default `bm25s` retriever,
top {k}), by hops: the first document of the chain is usually found, the later ones rarely, so
answering needs retrieval driven by the partial answer.

| hops | probes | first chain document retrieved | all gold documents retrieved | mean gold recall |
|---|---|---|---|---|
{first_hop}

## Format

`corpus.jsonl`: `{{"id", "title", "text"}}`; ids name the document kind: `team-`, `svc-` (service
cards), `plat-` (platform), `deploy-`, `rel-` (release notes), `base-` (base image notes), `pol-`,
`oncall-`, `rb-` (runbooks), `pm-` (postmortems), `adr-`, `cfg-`.
`probes.jsonl`: `id` (eng-001 ...), `question`, `answers` (aliases for `single`, e.g. "4.12.0",
"ledgerbird:4.12.0", "v4.12.0"; all items for `set`; "yes" or "no" for `yes_no`), `answer_type`,
`gold_doc_ids` (every document on the chain, in the order the chain visits them) and `metadata`:
`hops` (1-4: how many documents a reader must visit one after the other, because each names what
to look up next; documents gathered side by side for a set answer count as one step), `kind` and
`steps` (the chain: for each step the document and
the text in it that the step relies on, quoted verbatim).

Kinds: `lookup` (one document), `multi-hop` (an entity bridges documents: queue to owning service
to team), `version-chain` (service to deploy manifest to release notes to base image notes),
`policy-exception` (a policy whose exceptions decide the answer, mostly yes/no, often after
looking up the service's tier), `incident` (starts from a postmortem), `aggregation` (a set
answer gathered from several documents).

Some probes are traps on purpose: ledgerbird's production batch size is set by its config
overrides (300), not the release default (250); parcelpath has a staging beta on a newer base
image than production; the release notes of an older ledgerbird release name an older base
image; driftmark is exempt from one freeze but not the other.

## How it was made

Written by hand for flarebench.  The documents and probes live in `probes/build_engdocs.py`,
which checks the set's consistency (every quoted step occurs verbatim in its document, every gold
document exists, every non-yes/no answer occurs in a gold document, each queue has exactly one
owning service, each production image tag is in exactly one manifest and has release notes,
documents have 80-300 words) and writes these files deterministically:

```
python probes/build_engdocs.py          # rewrite probes/engdocs/
python probes/build_engdocs.py --check  # exit 1 if the committed files differ
```
"""


def _counts(values) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(Counter(values).items()))


def _median(xs: list[int]) -> int:
    xs = sorted(xs)
    return xs[len(xs) // 2]


def render_readme(corpus: list[dict], probes: list[dict]) -> str:
    w = [words(d["text"]) for d in corpus]
    g = [len(p["gold_doc_ids"]) for p in probes]
    return README_TEMPLATE.format(
        n_docs=len(corpus),
        n_probes=len(probes),
        doc_kinds=_counts(d["id"].split("-", 1)[0] for d in corpus),
        w_min=min(w),
        w_med=_median(w),
        w_max=max(w),
        by_type=_counts(p["answer_type"] for p in probes),
        by_hops=_counts(p["metadata"]["hops"] for p in probes),
        by_kind=_counts(p["metadata"]["kind"] for p in probes),
        g_min=min(g),
        g_med=_median(g),
        g_max=max(g),
        k=FIRST_HOP_K,
        first_hop="\n".join(
            f"| {h} | {n} | {first} | {every} | {recall:.2f} |" for h, (n, first, every, recall) in FIRST_HOP.items()
        ),
    )


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def files() -> dict[str, str]:
    """The three files of the set, name -> text; raises ValueError when the set is inconsistent."""
    corpus, probes = corpus_rows(), probe_rows()
    problems = check(corpus, probes)
    if problems:
        raise ValueError("engdocs is inconsistent:\n" + "\n".join(problems))
    return {"corpus.jsonl": _jsonl(corpus), "probes.jsonl": _jsonl(probes), "README.md": render_readme(corpus, probes)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--out", type=Path, default=OUT, help="folder to write (default: probes/engdocs)")
    ap.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    args = ap.parse_args(argv)
    try:
        wanted = files()
    except ValueError as e:
        print(e, file=sys.stderr)
        return 1
    if args.check:
        stale = [n for n, t in wanted.items() if not (args.out / n).is_file() or (args.out / n).read_text("utf-8") != t]
        for name in stale:
            print(f"{args.out / name}: differs from what build_engdocs.py writes", file=sys.stderr)
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in wanted.items():
        with open(args.out / name, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    print(f"wrote {args.out}: {wanted['probes.jsonl'].count(chr(10))} probes, {len(DOCS)} documents")
    return 0


if __name__ == "__main__":
    sys.exit(main())
