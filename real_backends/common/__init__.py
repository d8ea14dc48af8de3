"""What the real backends share: the event-semaphore engine (:mod:`.engine`), its device base
(:mod:`.device`), the native-event pool (:mod:`.pool`) and the kernel ABI (:mod:`.kernel_abi`)."""
