"""kopf's diff base for TrainingJobs, built without copying what it throws away.

kopf builds, on every watch event of a job, the job's "essence" (to decide whether a changing
handler is due; it builds it even when, as here, there is none): the body less `metadata` (but its
labels and annotations) and less `status`. Its stock storage deep-copies the whole body first and
deletes those parts after; a job's status (ranks, history, conditions) and `metadata.managedFields`
are most of the body, and each status write brings an event: that copy was a large share of the
operator's CPU, and copying only the spec still a fair one (docs/figures.md, "CPU"). This storage
copies nothing but the labels and annotations it filters: the
essence holds the event's own spec. kopf copies so that later changes to a body cannot change an
essence it keeps; nothing changes a watch event's body after it is decoded (kopf's patches and
Phalanx's writes are new objects), and with no changing handlers kopf keeps no essence past the
event (it compares two, then drops them).

Each event's two essences then go through the progress storage's `clear`, which deep-copies each
once per storage (kopf's default keeps progress both in annotations and in `status.kopf`, which this
CRD's status schema prunes). `AnnotationProgressStorage` keeps the annotations only and
copies only the annotations it filters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import kopf

KEPT_METADATA = ("labels", "annotations")
"""The metadata kopf's essence keeps (`DiffBaseStorage.build` cherry-picks these two)."""
DROPPED = ("apiVersion", "kind", "metadata", "status")
"""What kopf's essence leaves out of a body (the metadata comes back as `KEPT_METADATA`)."""
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""kubectl's copy of the applied manifest: kopf leaves it out of the essence."""


class SpecDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """kopf's annotation diff base (same key, same stored form, the same essence), built
    without copying the spec."""

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[kopf.FieldSpec] | None = None
    ) -> kopf.BodyEssence:
        if extra_fields:  # a handler watches a field that may be in status: kopf's own way
            return super().build(body=body, extra_fields=extra_fields)
        essence: dict[str, Any] = {
            key: value for key, value in body.items() if key not in DROPPED
        }  # the values are the body's own, not copies
        metadata = body.get("metadata", {})
        kept = {key: dict(metadata[key]) for key in KEPT_METADATA if key in metadata}
        annotations: dict[str, str] = kept.get("annotations", {})
        ignored = self._detect_marked_prefixes(annotations)  # other kopf operators' storages
        for key in list(annotations):
            prefix = key.split("/", 1)[0] if "/" in key else None
            if prefix in ignored or key == LAST_APPLIED:
                del annotations[key]
        essence["metadata"] = kept
        built = cast(kopf.BodyEssence, essence)
        self.remove_annotations(built, set(self.make_keys(self.key, body=body)))
        self.remove_empty_stanzas(built)
        return built


class AnnotationProgressStorage(kopf.AnnotationsProgressStorage):
    """kopf's annotation progress storage whose `clear` copies only what it changes."""

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        metadata: dict[str, Any] = dict(essence.get("metadata", {}))
        prefix = f"{self.prefix}/" if self.prefix else None
        annotations: dict[str, str] = metadata.get("annotations", {})
        metadata["annotations"] = {
            key: value
            for key, value in annotations.items()
            if prefix is None or not key.startswith(prefix)
        }
        cleared = cast(kopf.BodyEssence, {**essence, "metadata": metadata})
        self.remove_empty_stanzas(cleared)
        return cleared
