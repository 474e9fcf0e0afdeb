// Shared-memory plan for kernel gemm_epilogue: status optimal, arena 66048 bytes (lower bound 66048, naive sum 131584).
// Launch with dynamic_shared_memory_size 66048; offsets are bytes from the arena base.
module attributes {gpu.container_module} {
  gpu.module @gemm_epilogue_plan {
    gpu.func @gemm_epilogue() kernel {
      %_smem = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %_c0 = arith.constant 0 : index
      // 32768 bytes at offset 0, live [0, 4)
      %A_s = memref.view %_smem[%_c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16384xf16, #gpu.address_space<workgroup>>
      %_c32768 = arith.constant 32768 : index
      // 32768 bytes at offset 32768, live [0, 4)
      %B_s = memref.view %_smem[%_c32768][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16384xbf16, #gpu.address_space<workgroup>>
      // 65536 bytes at offset 0, live [6, 9)
      %C_s = memref.view %_smem[%_c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16384xf32, #gpu.address_space<workgroup>>
      %_c65536 = arith.constant 65536 : index
      // 512 bytes at offset 65536, live [2, 9)
      %bias = memref.view %_smem[%_c65536][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128xf32, #gpu.address_space<workgroup>>
      // Barriers by program point (each runs before the accesses there):
      //   point 4: gpu.barrier  // existing: the plan relies on it
      gpu.return
    }
  }
}
