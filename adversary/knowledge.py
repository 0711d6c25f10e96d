"""The adversary's stated side knowledge: everything it knows besides what the server observed.

docs/architecture.md, "Trust boundaries": "The adversary sees what the server sees plus the public
parameters and an explicit, documented auxiliary set". The experiment (`sim`, the only holder of
truth) decides that set before the run and writes it to ``RUN_DIR/adversary/knowledge/``; the
adversary's nodes (the live observer, the sybil clients, `privrec replay`) read it from there and
nowhere else:

* ``auxiliary.npz``: raw profiles of users who are NOT in the run (`[adversary]
  outside_users`), for item priors and calibration (Balu §3.5.1's "training users"; the RPT
  rating recovery calibrates the users' means and deviations on them).
* ``targets.json``: for the kNN sybil attack (Zhu §2.3 after Calandrino et al. 2011), the ids of
  the attacked users and the m (item, rating) pairs of each one's history the attacker knows.
* ``candidates.json``: for membership inference, known ratings of candidate users under opaque
  labels, some in the run and some not; which is which is exactly what the attack must guess,
  and only the referee knows it.
* ``attack_targets.json``: when the experiment samples the users its attacks are scored on
  (`[adversary] targets`), their wire ids. The attacks still read every observed release and
  output estimates for these users only. The ids say nothing the transcript does not: every
  participant's id is in it.
* ``attack_fit_users.json``: when the experiment has the attacks fit their population-level
  parameters on a sample of users (`[adversary] fit_users`), their wire ids (every attack target
  among them). The adversary then keeps only those users' profile releases.

Everything here is plain data: no truth beyond what the files say reaches the adversary.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import DataError
from privrec.shared.files import private_dir, write_private
from privrec.shared.serde import write_npz
from privrec.shared.types import FloatArray, IntArray

KNOWLEDGE_DIR = Path("adversary") / "knowledge"
"""Where the knowledge lives, relative to the run directory."""
ATTACK_TARGETS = "attack_targets.json"
FIT_USERS = "attack_fit_users.json"


@dataclasses.dataclass(frozen=True)
class KnownProfile:
    """Ratings of one user that the adversary knows.

    Attributes:
        label: the user's wire id (a kNN target) or an opaque label (a membership candidate).
        items: int64 array (g,), strictly increasing item indices.
        ratings: float64 array (g,), her ratings of them.
    """

    label: str
    items: IntArray
    ratings: FloatArray

    def to_json(self) -> dict[str, Any]:
        """The profile as JSON-ready lists."""
        return {
            "label": self.label,
            "items": self.items.tolist(),
            "ratings": self.ratings.tolist(),
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> KnownProfile:
        """Read a profile written by `to_json`; refuses items that are not strictly increasing."""
        items = np.asarray(raw["items"], dtype=np.int64)
        ratings = np.asarray(raw["ratings"], dtype=np.float64)
        if items.shape != ratings.shape or np.any(np.diff(items) <= 0):
            raise DataError(f"known profile {raw.get('label')!r}: items must be increasing")
        return cls(str(raw["label"]), items, ratings)


@dataclasses.dataclass(frozen=True)
class AdversaryKnowledge:
    """The side knowledge of one run (module docstring).

    Attributes:
        auxiliary: raw profiles of users outside the run, or None.
        targets: the kNN sybil attack's targets (label = wire id) with their known ratings.
        candidates: the membership candidates (opaque labels) with their known ratings.
        attack_targets: the wire ids of the users the attacks are scored on, when sampled;
            None: every user.
        fit_users: the wire ids of the users whose releases the attacks fit on, when sampled;
            None: every observed user.
    """

    auxiliary: RatingData | None = None
    targets: tuple[KnownProfile, ...] = ()
    candidates: tuple[KnownProfile, ...] = ()
    attack_targets: tuple[str, ...] | None = None
    fit_users: tuple[str, ...] | None = None

    @property
    def empty(self) -> bool:
        """True when the adversary knows nothing (no auxiliary data, targets or candidates)."""
        return (
            self.auxiliary is None
            and not self.targets
            and not self.candidates
            and self.attack_targets is None
            and self.fit_users is None
        )

    def describe(self) -> dict[str, int]:
        """Sizes, for logs and the report."""
        return {
            "outside_users": 0 if self.auxiliary is None else self.auxiliary.n_users,
            "targets": len(self.targets),
            "candidates": len(self.candidates),
        }

    # ------------------------------------------------------------------ files
    def write(self, run_dir: Path) -> Path:
        """Write under ``run_dir/adversary/knowledge`` (replacing what was there)."""
        out = private_dir(run_dir / KNOWLEDGE_DIR)  # raw profiles and user ids: 0600 files
        for stale in (
            "auxiliary.npz",
            "targets.json",
            "candidates.json",
            ATTACK_TARGETS,
            FIT_USERS,
        ):
            (out / stale).unlink(missing_ok=True)
        if self.auxiliary is not None:
            aux = self.auxiliary
            write_npz(
                out / "auxiliary.npz",
                {
                    "name": np.array(aux.name),
                    "data": aux.ratings.data,
                    "indices": aux.ratings.indices.astype(np.int64),
                    "indptr": aux.ratings.indptr.astype(np.int64),
                    "shape": np.array(aux.ratings.shape, dtype=np.int64),
                    "user_ids": np.asarray(aux.user_ids, dtype=np.int64),
                    "item_ids": np.asarray(aux.item_ids, dtype=np.int64),
                    "rating_scale": np.array(aux.rating_scale, dtype=np.float64),
                },
                private=True,
            )
        for name, rows in (("targets", self.targets), ("candidates", self.candidates)):
            if rows:
                text = json.dumps([r.to_json() for r in rows], indent=1)
                write_private(out / f"{name}.json", text.encode())
        for name, ids in ((ATTACK_TARGETS, self.attack_targets), (FIT_USERS, self.fit_users)):
            if ids is not None:
                write_private(out / name, json.dumps(list(ids)).encode())
        return out

    @classmethod
    def read(cls, run_dir: Path) -> AdversaryKnowledge:
        """What `write` wrote (an empty knowledge when the directory does not exist).

        Raises:
            DataError: a malformed file (naming it).
        """
        src = run_dir / KNOWLEDGE_DIR
        auxiliary = None
        if (src / "auxiliary.npz").exists():
            try:
                with np.load(src / "auxiliary.npz") as z:
                    n_rows, n_cols = (int(x) for x in z["shape"])
                    lo, hi = (float(x) for x in z["rating_scale"])
                    auxiliary = RatingData(
                        str(z["name"]),
                        sp.csr_matrix(
                            (z["data"], z["indices"], z["indptr"]), shape=(n_rows, n_cols)
                        ),
                        z["user_ids"].copy(),
                        z["item_ids"].copy(),
                        (lo, hi),
                    )
            except (KeyError, ValueError) as exc:
                raise DataError(f"{src / 'auxiliary.npz'}: malformed ({exc})") from exc

        def rows(name: str) -> tuple[KnownProfile, ...]:
            path = src / f"{name}.json"
            if not path.exists():
                return ()
            try:
                return tuple(KnownProfile.from_json(r) for r in json.loads(path.read_text()))
            except (KeyError, TypeError, ValueError) as exc:
                raise DataError(f"{path}: malformed ({exc})") from exc

        def ids(name: str) -> tuple[str, ...] | None:
            path = src / name
            if not path.exists():
                return None
            try:
                listed = json.loads(path.read_text())
                if not (isinstance(listed, list) and all(isinstance(i, str) for i in listed)):
                    raise ValueError("expected a list of user ids")
            except ValueError as exc:
                raise DataError(f"{path}: malformed ({exc})") from exc
            return tuple(listed)

        return cls(
            auxiliary, rows("targets"), rows("candidates"), ids(ATTACK_TARGETS), ids(FIT_USERS)
        )


__all__ = ["KNOWLEDGE_DIR", "AdversaryKnowledge", "KnownProfile"]
