# Two hosts emulated by two network namespaces joined by a veth pair (tests/dist_netns.sh): one rank in
# each, mpirun's rsh agent replaced by `ip netns exec`, the MPI traffic over TCP on the veth only; the
# losses must equal those of 2 ranks on one host over shared memory. Needs root, `ip netns` and veth
# pairs: exits 77 (skipped, saying what was refused) where the machine does not allow them. RUN_SERIAL:
# it creates network interfaces and namespaces. Included by tests/CMakeLists.txt in builds with MPI.
if(AMPC_BUILD_TOOLS)
  add_test(NAME dist_netns COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/dist_netns.sh $<TARGET_FILE:ampc_cli>
           ${AMPC_MPIRUN})
  set_tests_properties(dist_netns PROPERTIES LABELS mpi SKIP_RETURN_CODE 77 TIMEOUT 120 RUN_SERIAL TRUE
                       ENVIRONMENT "${AMPC_MPI_ENV}")
endif()
