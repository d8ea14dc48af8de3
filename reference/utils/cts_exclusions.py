"""CTS tests a device model cannot run, by the reason it cannot — shared by the simulated devices and
the real backends that follow the same driver design (``docs/cts.md``).

>>> sorted(in_order_queue("MTLCommandQueue"))[0]
'SemaphoreSubmissionTest.BatchWaitingOnAnotherAndHostSignal'
>>> list(sticky_failure())
['QueueAllocaTest.FailedDeallocaWaitDoesNotDealloca']
"""

from __future__ import annotations

# SemaphoreSubmissionTests that submit a consumer before its producer on one queue (IREE disables
# SemaphoreSubmissionTest.* on Metal for this reason).
CONSUMER_FIRST = ("IntermediateSemaphoreBetweenDeviceBatches", "TwoBatchesWaitingOn1FormerBatchAmongst2",
                  "TwoBatchesWaitingOnDifferentSemaphoreValues", "BatchWaitingOnAnotherAndHostSignal",
                  "DeviceBatchSignalAnotherAndHost",
                  "MultiQueueFanOutDifferentValuesBeforeSignal")  # (queue 0: a wait on p before p's signal)


def in_order_queue(queue: str) -> dict[str, str]:
    """Exclusions of a device whose waits are encoded on an in-order ``queue`` (Metal, OpenCL)."""
    reason = f"submits a consumer before its producer on the same in-order {queue}, which stalls the queue " \
             "on the consumer's wait forever (IREE disables SemaphoreSubmissionTest.* on Metal)"
    return {f"SemaphoreSubmissionTest.{name}": reason for name in CONSUMER_FIRST}


def sticky_failure() -> dict[str, str]:
    """Exclusions of the event-semaphore engine design, whose queue status is sticky after a failure."""
    return {"QueueAllocaTest.FailedDeallocaWaitDoesNotDealloca":
            "a failed wait makes the queue status sticky (HAL_SEMANTICS B.3, [CUDA-v2]/[H] "
            "deferred_work_queue.c): every later action on the device fails, so the buffer cannot be refilled"}
