# The device seam (label `device`): every op on the guard device (test_ops_guard, in CMakeLists.txt), the
# device calls and listener lists (test_device), a planted host access that the guard device must catch
# (test_planted: the library's objects with src/ops/elementwise.c rebuilt with AMPC_PLANT_HOST_ACCESS), and
# the CLI's flows on the guard device against the CPU's bits (device_guard.sh; with MPI also mpirun -np 2).
add_library(ampc_planted_objects OBJECT ${PROJECT_SOURCE_DIR}/src/ops/elementwise.c)
target_compile_definitions(ampc_planted_objects PRIVATE AMPC_PLANT_HOST_ACCESS _GNU_SOURCE)
target_include_directories(ampc_planted_objects PRIVATE ${PROJECT_SOURCE_DIR}/include)
set_target_properties(ampc_planted_objects PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
add_executable(test_planted test_planted.c $<TARGET_OBJECTS:ampc_planted_objects>
               $<FILTER:$<TARGET_OBJECTS:ampc_objects>,EXCLUDE,/src/ops/elementwise\\.c\\.o$>)
target_include_directories(test_planted PRIVATE ${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(test_planted PRIVATE PkgConfig::CMOCKA Threads::Threads m ZLIB::ZLIB)
if(AMPC_HAVE_MPI)
  target_link_libraries(test_planted PRIVATE MPI::MPI_C)
endif()
add_test(NAME test_planted COMMAND test_planted)
set_tests_properties(test_planted PROPERTIES LABELS "unit;device" TIMEOUT 120
                     ENVIRONMENT "XDG_CACHE_HOME=${PROJECT_BINARY_DIR}/test-cache")

if(AMPC_BUILD_TOOLS)
  add_executable(make_fashion make_fashion.c)
  set(guard_env "XDG_CACHE_HOME=${PROJECT_BINARY_DIR}/test-cache")
  set(guard_mpirun "")
  if(AMPC_HAVE_MPI)
    set(guard_mpirun ${AMPC_MPIRUN})
    list(APPEND guard_env ${AMPC_MPI_ENV})
  endif()
  add_test(NAME device_guard COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/device_guard.sh $<TARGET_FILE:ampc_cli>
           $<TARGET_FILE:make_fashion> $<TARGET_FILE:st_diff> ${guard_mpirun})
  set_tests_properties(device_guard PROPERTIES LABELS "unit;device" TIMEOUT 900 ENVIRONMENT "${guard_env}")
endif()
