"""The thesis's claims for the MACRM reproductions (:mod:`megha.experiments.claims`): Figs. 3.5-3.8, 4.2, 4.3 and
Appendix A, checked against each experiment's summary document."""

from __future__ import annotations

SPARROW_FLAT = (
    "with Table 4.3's requests a task needs about 0.5 % of a node and the thesis's initial-load model keeps ~5 % of "
    "nodes without that room at every load, so random sampling rarely fails and the thesis's Sparrow stays nearly "
    "flat (see the module docstring); the thesis's steep growth is not reproduced"
)


def sampling_claims(doc: dict) -> list:
    """§3.1.3-3.1.4, Figs. 3.5, 3.7, 3.8 at 90-95 % load."""
    from megha.experiments import claims as C

    ch = doc.get("checks", {})
    why = "the gains depend on how often sampling rounds fail at 95 %; see sampling.md (failed rounds per job)"
    return [
        C.at_least(
            "doubling",
            "Fig. 3.5",
            "doubling the sampling rate after a failure cuts service time by more than 25 % at 95 % load",
            ch.get("doubling_vs_power_of_two_at_95_pct"),
            25.0,
            paper="> 25 %",
            fmt=C.fmt_pct,
            why_not=why,
        ),
        C.within_factor(
            "adaptive-vs-doubling",
            "Fig. 3.7",
            "the adaptive initial rate cuts service time vs doubling at 95 % load",
            ch.get("adaptive_vs_doubling_at_95_pct"),
            21.0,
            2.0,
            paper="up to 21 %",
            fmt=C.fmt_pct,
            why_not=why,
        ),
        C.within_factor(
            "adaptive-vs-power-of-two",
            "Fig. 3.7",
            "the adaptive initial rate cuts service time vs the power of two choices at 95 % load",
            ch.get("adaptive_vs_power_of_two_at_95_pct"),
            43.0,
            2.0,
            paper="up to 43 %",
            fmt=C.fmt_pct,
            why_not=why,
        ),
        *(
            C.at_least(
                f"centralized-{pct}",
                "Fig. 3.8",
                f"switching to centralized mode lowers service time further at {pct} % load",
                ch.get(f"centralized_vs_adaptive_at_{pct}_pct"),
                0.0,
                paper="lower (marginal below 90 %)",
                fmt=C.fmt_pct,
                why_not="the centralized mode serves requests from the arbitrator's queue at heartbeats; at this "
                "load sampling still finds room quickly",
            )
            for pct in (90, 95)
        ),
    ]


def service_time_claims(doc: dict) -> list:
    """§4.2.1, Fig. 4.2 and the abstract."""
    from megha.experiments import claims as C

    ch = doc.get("checks", {})
    res = doc.get("results", {})

    def m(lab: str, load: int) -> float | None:
        return res.get(lab, {}).get(str(load), {}).get("mean")

    ms = C.fmt_seconds

    return [
        C.is_true(
            "yarn-highest",
            "Fig. 4.2",
            "YARN has the highest service time at every load (MACRM below it)",
            ch.get("macrm_below_yarn_every_load"),
            paper="YARN highest",
            why_not="",
        ),
        C.within_factor(
            "vs-yarn-70",
            "Fig. 4.2",
            "MACRM's service time below YARN's at 70 % load",
            ch.get("macrm_vs_yarn_70_pct"),
            32.0,
            1.5,
            paper="32 % lower",
            fmt=C.fmt_pct,
            why_not=f"YARN is about as slow as the thesis's ({ms(m('YARN', 70))} vs {ms(0.01219 / 0.68)} implied by "
            f"its 12.19 ms and 32 %) but MACRM is faster ({ms(m('MACRM', 70))} vs 12.19 ms): see macrm-70",
        ),
        C.within_factor(
            "vs-yarn-90",
            "Fig. 4.2",
            "MACRM's service time below YARN's at 90 % load",
            ch.get("macrm_vs_yarn_90_pct"),
            56.0,
            1.5,
            paper="56 % lower",
            fmt=C.fmt_pct,
            why_not="MACRM here is faster than the thesis's at every load (see macrm-70)",
        ),
        C.within_pct(
            "macrm-70",
            "Fig. 4.2",
            "MACRM's average service time at 70 % load",
            m("MACRM", 70),
            0.01219,
            25.0,
            fmt=ms,
            why_not="the thesis measured an emulation whose actors spend processing time on every message; here a "
            "message costs only the 0.4 ms one-way delay, so MACRM's sampling rounds are faster",
        ),
        C.within_pct(
            "sparrow-70",
            "Fig. 4.2",
            "Sparrow's average service time at 70 % load",
            m("Sparrow-thesis", 70),
            0.01096,
            25.0,
            fmt=ms,
            why_not=SPARROW_FLAT,
        ),
        C.within_factor(
            "vs-sparrow-90",
            "Fig. 4.2",
            "MACRM's service time below Sparrow's at 90 % load",
            ch.get("macrm_vs_sparrow_thesis_90_pct"),
            49.0,
            1.5,
            paper="up to 49 % lower",
            fmt=C.fmt_pct,
            why_not=SPARROW_FLAT,
        ),
        C.within_factor(
            "sparrow-growth",
            "Fig. 4.2",
            "Sparrow's service time grows steeply with load (90 % / 70 %)",
            ch.get("sparrow_thesis_90_over_70"),
            2.6,
            1.5,
            paper="≈ 2.6× (Appendix A)",
            fmt=C.fmt_ratio,
            why_not=SPARROW_FLAT,
        ),
        C.at_least(
            "sparrow-grows-most",
            "Fig. 4.2",
            "Sparrow's service time grows more with load than MACRM's (growth 70 -> 90 %, Sparrow / MACRM)",
            C.ratio(ch.get("sparrow_thesis_90_over_70"), ch.get("macrm_90_over_70")),
            1.0,
            paper="Sparrow highest growth",
            why_not=SPARROW_FLAT,
        ),
    ]


#: Appendix A, bursts of 5 jobs x 10 tasks: (label, load %, thesis's mean of burst maxima in seconds)
BURST_CORNERS = (("MACRM", 70, 0.012299), ("MACRM", 90, 0.014548), ("Sparrow-thesis", 70, 0.011051),
                 ("Sparrow-thesis", 90, 0.028683), ("YARN", 70, 0.019240), ("YARN", 90, 0.037219))  # fmt: skip


def burst_claims(doc: dict) -> list:
    """§4.2.2, Fig. 4.3 and Appendix A."""
    from megha.experiments import claims as C

    ch = doc.get("checks", {})
    res = doc.get("results", {})

    ms = C.fmt_seconds

    out = [
        C.is_true(
            "yarn-worst",
            "Fig. 4.3",
            "YARN has the worst burst service time at every load (MACRM below it)",
            ch.get("macrm_below_yarn_every_load"),
            paper="YARN worst",
            why_not="",
        ),
        C.at_most(
            "sparrow-at-70",
            "Fig. 4.3",
            "at average load (70 %) Sparrow is faster than MACRM (MACRM's gain over Sparrow, negative = behind)",
            ch.get("macrm_vs_sparrow_thesis_70_pct"),
            0.0,
            paper="Sparrow faster",
            fmt=C.fmt_pct,
            why_not="",
        ),
        C.is_true(
            "macrm-at-high",
            "Fig. 4.3",
            "at high load (85-90 %) MACRM is faster than Sparrow",
            ch.get("macrm_below_sparrow_thesis_at_85_90"),
            paper="MACRM faster",
            why_not=SPARROW_FLAT,
        ),
    ]
    for lab, load, paper in BURST_CORNERS:
        out.append(
            C.within_pct(
                f"{lab}-{load}-5x10",
                "Appendix A",
                f"{lab}: mean of the maximum service time of 5-job x 10-task bursts at {load} % load",
                res.get(lab, {}).get(str(load), {}).get("5x10"),
                paper,
                50.0,
                fmt=ms,
                why_not=SPARROW_FLAT
                if lab.startswith("Sparrow")
                else "here YARN places tasks at the next heartbeat of any node with room (500 nodes every 2 s: one "
                "every 4 ms), with no application master to start first; the thesis's YARN starts one (the YARN+AM "
                "runs add that wait)"
                if lab == "YARN"
                else "the thesis measured an emulation whose actors spend processing time on every message; here a "
                "message costs only the 0.4 ms one-way delay",
            )
        )
    return out
