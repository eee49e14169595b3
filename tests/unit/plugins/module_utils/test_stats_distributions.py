# SPDX-License-Identifier: Apache-2.0
"""Student t and normal quantiles, and the error spending over looks."""

import math

import pytest
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.base import SPENDING, StatsError
from ansible_collections.jetson_llm.speculative.plugins.module_utils._stats.distributions import (
    _betainc,
    look_confidence,
    normal_ppf,
    spent_alpha,
    t_cdf,
    t_isf,
    t_ppf,
)
from hypothesis import given
from hypothesis import strategies as st

# Critical values of Student's t, (p, df) -> t_p. Three-decimal values are printed in the
# NIST/SEMATECH e-Handbook of Statistical Methods, section 1.3.6.7.2 ("Critical values of the
# Student's t distribution"); the six-decimal values below are R's qt(p, df) (identical to
# scipy.stats.t.ppf) and round to the NIST figures.
T_TABLE = [
    (0.975, 1, 12.706205),
    (0.975, 2, 4.302653),
    (0.975, 3, 3.182446),
    (0.975, 4, 2.776445),
    (0.975, 5, 2.570582),
    (0.975, 10, 2.228139),
    (0.975, 30, 2.042272),
    (0.975, 100, 1.983972),
    (0.95, 1, 6.313752),
    (0.95, 2, 2.919986),
    (0.95, 10, 1.812461),
    (0.95, 120, 1.657651),
    (0.99, 1, 31.820516),
    (0.99, 3, 4.540703),
    (0.995, 1, 63.656741),
    (0.995, 2, 9.924843),
    (0.995, 4, 4.604095),
    (0.995, 5, 4.032143),
    (0.999, 3, 10.214532),
    (0.999, 10, 4.143700),
    (0.9995, 2, 31.599055),
    (0.9995, 10, 4.586894),
    (0.9999, 3, 22.203742),
    (0.6, 7, 0.263167),
]


@pytest.mark.parametrize(("p", "df", "expected"), T_TABLE)
def test_t_quantile_matches_reference_table(p, df, expected):
    assert t_ppf(p, df) == pytest.approx(expected, abs=1e-6)
    assert t_ppf(1.0 - p, df) == pytest.approx(-expected, abs=1e-6)


@pytest.mark.parametrize("p", [0.51, 0.6, 0.9, 0.975, 0.999, 0.9999999])
def test_t_quantile_matches_closed_forms(p):
    # df = 1 is the Cauchy distribution: t_p = tan(pi (p - 1/2)) = 1 / tan(pi (1 - p)).
    assert t_ppf(p, 1) == pytest.approx(1 / math.tan(math.pi * (1 - p)), rel=1e-10)
    # df = 2: t_p = (2p - 1) / sqrt(2 p (1 - p)).
    assert t_ppf(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-10)
    # df = 4: with a = 4p(1-p) and q = cos(arccos(sqrt(a)) / 3) / sqrt(a), t_p = 2 sqrt(q - 1).
    a = 4 * p * (1 - p)
    q = math.cos(math.acos(math.sqrt(a)) / 3) / math.sqrt(a)
    assert t_ppf(p, 4) == pytest.approx(2 * math.sqrt(q - 1), rel=1e-9)


def test_t_quantile_tends_to_the_normal_quantile():
    for p in (0.9, 0.975, 0.999):
        assert t_ppf(p, 1e7) == pytest.approx(normal_ppf(p), abs=1e-6)
    assert normal_ppf(0.975) == pytest.approx(1.959964, abs=1e-6)


def test_t_median_and_non_integer_df():
    assert t_ppf(0.5, 3) == 0.0
    assert t_cdf(0.0, 3) == 0.5
    # non-integer degrees of freedom lie between their integer neighbours
    assert t_ppf(0.975, 4) > t_ppf(0.975, 4.5) > t_ppf(0.975, 5)


@given(st.floats(min_value=1e-6, max_value=1 - 1e-6), st.floats(min_value=0.5, max_value=500))
def test_t_cdf_inverts_the_quantile(p, df):
    assert t_cdf(t_ppf(p, df), df) == pytest.approx(p, rel=1e-9, abs=1e-12)


@given(st.floats(min_value=0.501, max_value=0.9999), st.integers(min_value=1, max_value=200))
def test_t_quantile_decreases_with_df(p, df):
    assert t_ppf(p, df) > t_ppf(p, df + 1) > normal_ppf(p)


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5, True, "0.5", float("nan")])
def test_t_quantile_rejects_bad_probabilities(bad):
    with pytest.raises(StatsError, match="probability"):
        t_ppf(bad, 3)


@pytest.mark.parametrize("bad", [0, -1, float("inf"), None, True])
def test_t_rejects_bad_degrees_of_freedom(bad):
    with pytest.raises(StatsError, match="degrees of freedom"):
        t_ppf(0.9, bad)
    with pytest.raises(StatsError, match="degrees of freedom"):
        t_cdf(1.0, bad)


def test_incomplete_beta_limits_and_a_closed_form():
    assert _betainc(2.0, 3.0, 0.0, 1.0) == 0.0
    assert _betainc(2.0, 3.0, 1.0, 0.0) == 1.0
    # I_x(1, b) = 1 - (1 - x)^b, on both sides of the continued fraction's switch point
    for x in (0.1, 0.5, 0.9):
        assert _betainc(1.0, 3.0, x, 1 - x) == pytest.approx(1 - (1 - x) ** 3, rel=1e-12)


def test_t_isf_rejects_bad_tail():
    with pytest.raises(StatsError, match="tail probability"):
        t_isf(0.0, 3)
    assert t_isf(0.5, 3) == 0.0
    assert t_isf(0.975, 5) == pytest.approx(-2.570582, abs=1e-6)


# ------------------------------------------------------------------------ error spending


@pytest.mark.parametrize("spending", SPENDING)
@pytest.mark.parametrize(("min_rounds", "max_rounds"), [(3, 10), (2, 2), (3, 4), (5, 20)])
def test_spending_adds_up_to_alpha(spending, min_rounds, max_rounds):
    alpha = 0.05
    spent = [1 - look_confidence(r, 1 - alpha, min_rounds, max_rounds, spending) for r in range(min_rounds, max_rounds + 1)]
    assert all(a > 0 for a in spent)
    assert math.fsum(spent) == pytest.approx(alpha, rel=1e-12)


def test_bonferroni_splits_alpha_evenly():
    assert look_confidence(3, 0.95, 3, 10, "bonferroni") == pytest.approx(1 - 0.05 / 8)
    assert look_confidence(10, 0.95, 3, 10, "bonferroni") == pytest.approx(1 - 0.05 / 8)


def test_spending_shapes():
    pocock = [1 - look_confidence(r, 0.95, 3, 10, "pocock") for r in range(3, 11)]
    obf = [1 - look_confidence(r, 0.95, 3, 10, "obrien_fleming") for r in range(3, 11)]
    # O'Brien-Fleming spends almost nothing early and grows; Pocock front-loads the first look
    assert obf == sorted(obf)
    assert obf[0] < 0.001 < obf[-1]
    assert pocock[0] > 0.05 / 8 > pocock[-1]
    # closed forms of the Lan-DeMets functions at t = 1
    assert spent_alpha(1.0, 0.05, "pocock") == pytest.approx(0.05)
    assert spent_alpha(1.0, 0.05, "obrien_fleming") == pytest.approx(0.05)
    assert spent_alpha(0.0, 0.05, "pocock") == 0.0
    assert spent_alpha(0.5, 0.05, "bonferroni") == pytest.approx(0.025)
    assert spent_alpha(2.0, 0.05, "bonferroni") == pytest.approx(0.05)  # clipped to t = 1
    # O'Brien-Fleming at t = 1/4: 2 - 2 Phi(1.959964 * 2)
    assert spent_alpha(0.25, 0.05, "obrien_fleming") == pytest.approx(8.857e-5, rel=1e-3)


def test_spending_rejects_unknown_names_and_rounds_outside_the_looks():
    with pytest.raises(StatsError, match="spending"):
        spent_alpha(0.5, 0.05, "haybittle")
    with pytest.raises(StatsError, match="rounds"):
        look_confidence(2, 0.95, 3, 10)
    with pytest.raises(StatsError, match="rounds"):
        look_confidence(11, 0.95, 3, 10)
