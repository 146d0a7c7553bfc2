# The library's data-parallel layer under mpirun, label `mpi`, in two programs sharing dist_test_util.c: test_dist
# (tests/test_dist.c: collectives, agreement, barrier, timeout, attach) and test_dist_train (tests/test_dist_train.c:
# data-parallel steps, buckets, overlap, ZeRO-1, found-inf, FP16, uneven shards, checkpoints), every case at 2 ranks;
# test_dist_np3 and test_dist_train_np3, the cases that depend on the world size at 3 (the collectives, attach,
# uneven shards, bucket padding, the division factor, the checkpoint gather); test_dist_mutation, the found-inf
# case with the agreement switched off (AMPC_TEST_DIST_NO_AGREEMENT), which must see the ranks decide
# differently: proof that test_dist_train would fail without the agreement. A program's arguments select the
# cases whose names contain one of them.
foreach(t test_dist test_dist_train)
  ampc_test(${t})
  target_sources(${t} PRIVATE dist_test_util.c)
  add_test(NAME ${t} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 $<TARGET_FILE:${t}>)
endforeach()
add_test(NAME test_dist_np3 COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 3 $<TARGET_FILE:test_dist> broadcast
                                    allreduce_f32 collective agree_barrier attach)
add_test(NAME test_dist_train_np3 COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 3
                                          $<TARGET_FILE:test_dist_train> zero1 fp16 uneven checkpoint)
add_test(NAME test_dist_mutation
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 $<TARGET_FILE:test_dist_train> found_inf)
set_tests_properties(test_dist test_dist_np3 test_dist_train test_dist_train_np3 PROPERTIES LABELS mpi TIMEOUT 120
                     ENVIRONMENT "${AMPC_MPI_ENV}")
set_tests_properties(test_dist_mutation PROPERTIES LABELS mpi TIMEOUT 120 ENVIRONMENT
                     "${AMPC_MPI_ENV};AMPC_TEST_DIST_NO_AGREEMENT=1;AMPC_TEST_DIST_EXPECT_DIVERGENCE=1")
