"""The offline claim-support rules (bench/support.py), one behaviour each, on small passages written
for the test (the figures on the labelled claims are tests/test_agreement.py's)."""

from __future__ import annotations

import pytest

from flarebench.bench.support import claim_supported

CA = (
    "Certificate authorities\n"
    "Certificates issued by corp-ca-2 are valid for 90 days and use 2048-bit RSA keys.\n"
    "Certificates issued by corp-ca-3 are valid for 30 days and use ECDSA P-384 keys."
)
DEPLOY = "Deploy notes: checkout\nThe checkout service runs 3 replicas in staging and 6 in production."
TEAM = "Team Kestrel\nTeam lead: Ines Marrowby.\nEngineering manager: Piet Oyelaran.\nChat channel: #kestrel-pay."
RELEASE = (
    "Release notes: sablekey 0.14.2\n"
    "Changes:\n"
    "- Session tokens now live 15 minutes instead of 30.\n"
    "- The default batch size rises from 200 to 250.\n"
    "Known issues: sablekey does not rotate keys on its own yet."
)
CONFIG = (
    "Rate limits\n"
    "Global default: 1000 requests per second per client.\n"
    "tindrel overrides the per-client limit to 2500 requests per second."
)
TIMEOUTS = "Timeouts\nThe default request timeout is 30s.\nmossgate overrides the request timeout to 15s."
RUNBOOK = (
    "Runbook: queue backlog\n"
    "1. Confirm the alert on the mossgate dashboard.\n"
    "2. Drain the affected node with mgctl drain.\n"
    "3. Restart the consumers one replica at a time."
)
MANIFEST = "Deploy manifest: parcelpath\nproduction:\n  image: parcelpath:2.3.1\nstaging:\n  image: parcelpath:2.4.0b1"


@pytest.mark.parametrize(
    ("claim", "contexts"),
    [
        # paraphrase: other words around the same values ("from" for "issued by")
        ("Certificates from corp-ca-2 are valid for 90 days.", [CA]),
        ("corp-ca-3 certificates expire after 30 days.", [CA]),
        ("Production runs 6 replicas of the checkout service.", [DEPLOY]),
        ("Ines Marrowby leads Team Kestrel.", [TEAM]),
        ("You can reach Team Kestrel in #kestrel-pay.", [TEAM]),
        ("sablekey 0.14.2 cut the session token lifetime from 30 minutes to 15 minutes.", [RELEASE]),
        ("tindrel clients may send 2500 requests per second.", [CONFIG]),
        ("First, confirm the alert on the mossgate dashboard.", [RUNBOOK]),
        ("The staging parcelpath deployment runs parcelpath:2.4.0b1.", [MANIFEST]),
        ("Certificates from corp-ca-2 last ninety days.", [CA]),  # number words are numbers
    ],
)
def test_supported(claim, contexts):
    assert claim_supported(claim, contexts)


@pytest.mark.parametrize(
    ("claim", "contexts", "why"),
    [
        ("Certificates from corp-ca-2 are valid for 30 days.", [CA], "the sibling's value"),
        ("Certificates from corp-ca-4 are valid for 90 days.", [CA], "an id the passage lacks"),
        ("Staging runs 6 replicas of the checkout service.", [DEPLOY], "staging/production swap"),
        ("Piet Oyelaran leads Team Kestrel.", [TEAM], "the manager named as lead"),
        ("Session tokens issued by sablekey 0.14.2 stay valid for 30 minutes.", [RELEASE], "the old value"),
        ("sablekey 0.14.2 lowered the default batch size from 250 to 200.", [RELEASE], "from/to reversed"),
        ("sablekey rotates keys on its own.", [RELEASE], "the passage says it does not"),
        ("First, drain the affected node with mgctl drain.", [RUNBOOK], "step 2, not the first"),
        ("mossgate keeps the default request timeout of 30s.", [TIMEOUTS], "overridden"),
        ("The production parcelpath deployment runs parcelpath:2.4.0b1.", [MANIFEST], "the staging block's image"),
    ],
)
def test_unsupported(claim, contexts, why):
    assert not claim_supported(claim, contexts), why


def test_a_two_sentence_unit_does_not_borrow_a_rival_name():
    # Aida's sentence and Ryan's birth date are adjacent; the date is Ryan's, not Aida's.
    passage = "Ryan Wang\nThe wife of Ryan Wang is Aida Wang.\nThe date of birth of Ryan Wang is 0292-03-17."
    assert claim_supported("Ryan Wang was born on 0292-03-17.", [passage])
    assert not claim_supported("Aida Wang was born on 0292-03-17.", [passage])


def test_a_relative_clause_is_read_against_its_antecedent():
    aida = "Aida Wang\nThe mother of Aida Wang is Shelli Beltran."
    shelli = "Shelli Beltran\nThe occupation of Shelli Beltran is actuary."
    assert claim_supported("Aida Wang's mom is Shelli Beltran, who works as an actuary.", [aida, shelli])
    assert not claim_supported("Aida Wang's mom is Shelli Beltran, who works as a nurse.", [aida, shelli])


def test_no_claim_words_no_support():
    assert not claim_supported("", [CA])
    assert not claim_supported("Certificates from corp-ca-2 are valid for 90 days.", [])
