# `mpirun -np 2 ampc train` against one process (tests/dist_train.sh): equivalence in fp32/bf16/fp16,
# determinism, --shard optimizer, --reduce-dtype, resume across world sizes, a rank killed, one error line
# per bad flag, only rank 0 writing. Included by tests/CMakeLists.txt in builds with MPI (AMPC_MPI_ENV).
# st_diff (tests/CMakeLists.txt) compares the tensors of two checkpoints by value (the CLI shows none).
if(AMPC_BUILD_TOOLS)
  add_test(NAME dist_train COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/dist_train.sh $<TARGET_FILE:ampc_cli>
           $<TARGET_FILE:ampc_json_check> $<TARGET_FILE:st_diff> ${AMPC_MPIRUN})
  set_tests_properties(dist_train PROPERTIES LABELS mpi TIMEOUT 300
                       ENVIRONMENT "${AMPC_MPI_ENV};XDG_CACHE_HOME=${PROJECT_BINARY_DIR}/test-cache")
endif()

# Ctrl-C under mpirun (tests/dist_stop.sh): twenty interrupts that save, a save slower than Open MPI's
# kill timeout warned about and survived. slow_rename is its LD_PRELOAD shim. Run alone: its subject is
# time, which other tests running beside it would take.
if(AMPC_BUILD_TOOLS)
  add_library(slow_rename MODULE slow_rename.c)
  target_link_libraries(slow_rename PRIVATE ${CMAKE_DL_LIBS})
  add_test(NAME dist_stop COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/dist_stop.sh $<TARGET_FILE:ampc_cli>
           $<TARGET_FILE:slow_rename> ${AMPC_MPIRUN})
  set_tests_properties(dist_stop PROPERTIES LABELS "mpi;stop" TIMEOUT 600 RUN_SERIAL TRUE
                       ENVIRONMENT "${AMPC_MPI_ENV};XDG_CACHE_HOME=${PROJECT_BINARY_DIR}/test-cache")
endif()
