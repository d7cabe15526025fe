"""Cutting a subscription's due events into batches (pure; no Django): at most `max_events` per batch, and a batch
stops growing before it would pass `preferred_bytes` (Event Grid's preferredBatchSizeInKilobytes); an event larger
than that on its own still goes, alone."""


def cut(items: list, sizes: list[int], *, max_events: int, preferred_bytes: int) -> list[list]:
    """`items` in order, cut into batches; `sizes[i]` is the encoded size of `items[i]`."""
    batches, current, used = [], [], 1  # the opening bracket
    for item, size in zip(items, sizes, strict=True):
        if current and (len(current) >= max_events or used + size + 1 > preferred_bytes):
            batches.append(current)
            current, used = [], 1
        current.append(item)
        used += size + 1  # the comma, or the closing bracket, after it
    if current:
        batches.append(current)
    return batches
