"""Clustering-based CF and PPCF on feature-based profiles (Bilge Ch. 6).

OFFLINE the server builds every training user's FBP (PBP or RBP, `server.models.features`) from
what it holds — true ratings for CF, the disguised matrix U′ for PPCF — and clusters the FBPs
into c clusters with k-means, fuzzy c-means or a 1-D SOM (`server.models.clustering`). ONLINE an
active user's query FBP joins the cluster of highest PCC to its centre (Bilge §6.2), and the
prediction is the kNN prediction restricted to that cluster's users (Bilge §6.3.3):

    CF:    p_aq  = v̄_a + Σ_{u∈N} (v_uq − v̄_u) w_au / Σ_{u∈N} w_au      (Eq 2.1, Eq 2.2)
    PPCF:  P′_aq = Σ_{u∈N} z′_uq w′_au / Σ_{u∈N} w′_au,  w′ = Z′_a·Z′_u/m  (Eq 2.4, Eq 2.6)

N = the k users of the cluster with the largest positive weights among those who filled q, the
rule of privrec's `PPCF`/`PearsonKNN` (``neighbours="raters"``), so that c = 1 — "no clustering
at all" (§6.5.1) — is exactly those models. The thesis's text reads "the nearest k users in that
cluster are chosen as neighbors. Finally, a prediction is produced as a weighted average of
those neighbors having a rating on q" (§6.2); that literal reading is ``neighbours="top-k"``
(`server.models.neighbourhood`). It is not the default because the thesis's own CF figure
cannot come from it: Pearson kNN with k = 100 under "top-k" leaves 9 % of the ML-100K test
ratings without a neighbour and has MAE 0.823 where Table 6.3 prints 0.7519 ("raters": 0.765;
5-fold, seeds 0–1, `bench/bilge_protocol_choices.py`; docs/decisions/clustering.md).

The private scheme never sees a true rating: U′, the query Z′_a and the genres are all it uses;
the active user de-normalises P′ herself (Eq 2.5).

References:
    Bilge, A. PhD thesis, Anadolu University, 2013, Ch. 6 (§6.2, §6.3, Tables 6.3–6.5).
    Bilge, A., Polat, H. "A comparison of clustering-based privacy-preserving collaborative
    filtering schemes", Applied Soft Computing 13(5), 2013.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from privrec.server.models.candidate_knn import CandidateKNN, Pool, Route
from privrec.server.models.clustering import METHODS, Clusters, partition
from privrec.server.models.knn import PPCF, PearsonKNN
from privrec.shared.capabilities import ModelCapabilities, ModelInput, ScoreKind, Serving
from privrec.shared.seeding import rng_for
from privrec.shared.types import FloatArray, IntArray


class _ClusteredKNN(CandidateKNN):
    """The clustering part shared by `ClusterCF` and `ClusterPPCF` (module docstring)."""

    clusters: int
    method: str
    fuzziness: float
    som_epochs: int

    def _set_clustering(
        self, clusters: int, method: str, fuzziness: float, som_epochs: int
    ) -> None:
        if isinstance(clusters, bool) or not isinstance(clusters, int | np.integer) or clusters < 1:
            raise ValueError(f"`clusters` must be an int >= 1, got {clusters!r}")
        if method not in METHODS:
            raise ValueError(f"`method` must be one of {METHODS}, got {method!r}")
        if not float(fuzziness) > 1.0:
            raise ValueError(f"`fuzziness` must be > 1, got {fuzziness!r}")
        if isinstance(som_epochs, bool) or not isinstance(som_epochs, int) or som_epochs < 1:
            raise ValueError(f"`som_epochs` must be an int >= 1, got {som_epochs!r}")
        self.clusters, self.method = int(clusters), method
        self.fuzziness, self.som_epochs = float(fuzziness), int(som_epochs)

    def _build_pool(self, rows: IntArray, group: int | None) -> Pool:
        rng = rng_for(self.random_state, "clusters", "all" if group is None else group)
        found = partition(
            self.profiles_[rows],
            self.clusters,
            self.method,
            rng=rng,
            fuzziness=self.fuzziness,
            som_epochs=self.som_epochs,
        )
        return Pool(rows, [rows[m] for m in found.members], found)

    def _route(self, pool: Pool, profiles: FloatArray) -> list[Route]:
        router: Clusters = pool.router
        n_centres = router.centres.shape[0]
        cost = n_centres if n_centres > 1 else 0
        return [Route((int(c),), cost) for c in router.assign(profiles)]


class ClusterPPCF(_ClusteredKNN, PPCF):
    """PPCF within the active user's FBP cluster (Bilge §6.3, Table 6.4, Table 6.5).

    Fitted on U′ (RPT releases); `predict` returns P′_aq for the client to de-normalise.

    Args:
        k: neighbours (Bilge: 100).
        clusters: c, the number of clusters (1 = no clustering).
        method: "kmeans" (KMC), "fcm" (fuzzy c-means) or "som" (1-D self-organising map).
        profile: "pbp" (purchase-based) or "rbp" (rating-based, from z′ on U′).
        neighbours: "raters" (default), "top-k" (the thesis's text read literally) or
            "absolute" (`server.models.neighbourhood`).
        fuzziness: FCM's exponent Q (Bilge: 2).
        som_epochs: SOM training epochs (Bilge: 500).
        random_state: seeds the k-means partition, the FCM memberships and the SOM order.
    """

    name: ClassVar[str] = "cluster_ppcf"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.ZSCORE
    )
    _knn_base = PPCF

    def __init__(
        self,
        k: int = 100,
        clusters: int = 2,
        method: str = "fcm",
        profile: str = "pbp",
        neighbours: str = "raters",
        fuzziness: float = 2.0,
        som_epochs: int = 500,
        random_state: int = 0,
    ) -> None:
        PPCF.__init__(self, k)
        self._set_common(profile, neighbours, random_state)
        self._set_clustering(clusters, method, fuzziness, som_epochs)


class ClusterCF(_ClusteredKNN, PearsonKNN):
    """Non-private Pearson kNN within the active user's FBP cluster (Bilge §6.2, Table 6.3).

    Fitted on true ratings (a trusted-curator run: the `raw` mechanism); `predict` returns
    ratings. Parameters as `ClusterPPCF`, plus:

    Args:
        clip: (lo, hi) rating scale to clip predictions to, or None.
    """

    name: ClassVar[str] = "cluster_cf"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.RATING
    )
    _knn_base = PearsonKNN

    def __init__(
        self,
        k: int = 100,
        clusters: int = 2,
        method: str = "fcm",
        profile: str = "pbp",
        neighbours: str = "raters",
        fuzziness: float = 2.0,
        som_epochs: int = 500,
        random_state: int = 0,
        *,
        clip: tuple[float, float] | None = None,
    ) -> None:
        PearsonKNN.__init__(self, k, clip=clip)
        self._set_common(profile, neighbours, random_state)
        self._set_clustering(clusters, method, fuzziness, som_epochs)


__all__ = ["ClusterCF", "ClusterPPCF"]
