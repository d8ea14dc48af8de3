from reference import hal

S = hal.StatusCode


def test_status_codes_have_iree_values():
    assert [(c.name, int(c)) for c in S] == [
        ("OK", 0), ("CANCELLED", 1), ("UNKNOWN", 2), ("INVALID_ARGUMENT", 3), ("DEADLINE_EXCEEDED", 4),
        ("NOT_FOUND", 5), ("ALREADY_EXISTS", 6), ("PERMISSION_DENIED", 7), ("RESOURCE_EXHAUSTED", 8),
        ("FAILED_PRECONDITION", 9), ("ABORTED", 10), ("OUT_OF_RANGE", 11), ("UNIMPLEMENTED", 12),
        ("INTERNAL", 13), ("UNAVAILABLE", 14), ("DATA_LOSS", 15), ("UNAUTHENTICATED", 16),
        ("DEFERRED", 17), ("INCOMPATIBLE", 18)]


def test_hal_error_carries_code_and_message():
    e = hal.HalError(S.DATA_LOSS, "device fault")
    assert (e.code, e.message, str(e)) == (S.DATA_LOSS, "device fault", "DATA_LOSS: device fault")
    c = e.clone()
    assert c is not e and (c.code, c.message) == (e.code, e.message)


def test_constants():
    assert hal.MAX_SEMAPHORE_VALUE == 2147483646
    assert hal.SEMAPHORE_FAILURE_VALUE == 2147483647
    assert hal.WHOLE_BUFFER == 2**64 - 1 == hal.QUEUE_AFFINITY_ANY


def test_flag_values_match_iree():
    M, U, A = hal.MemoryType, hal.BufferUsage, hal.MemoryAccess
    assert int(M.DEVICE_LOCAL) == 0x30 and int(M.HOST_LOCAL) == 0x46
    assert int(M.OPTIMAL_FOR_DEVICE) == 0x31 and int(M.OPTIMAL_FOR_HOST) == 0x47
    assert int(U.DEFAULT) == 0b110000000011 and int(U.MAPPING) == (1 << 24) | (1 << 27)
    assert int(U.DISPATCH) == 0x3F00
    assert int(A.ALL) == 7 and int(A.DISCARD_WRITE) == 6
    assert int(hal.CommandBufferMode.ALLOW_INLINE_EXECUTION) == 16
    assert int(hal.CommandBufferMode.UNVALIDATED) == 32
    assert int(hal.ExecutionStage.HOST) == 32 and int(hal.AccessScope.MEMORY_WRITE) == 512
    assert int(hal.BufferCompatibility.QUEUE_DISPATCH) == 1 << 11
