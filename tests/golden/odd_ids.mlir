// Shared-memory plan for kernel b3_odd_kernel: status optimal, arena 96 bytes (lower bound 96, naive sum 168).
// Launch with dynamic_shared_memory_size 96; offsets are bytes from the arena base.
module attributes {gpu.container_module} {
  gpu.module @b3_odd_kernel_plan {
    gpu.func @b3_odd_kernel() kernel {
      %_smem = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %_c0 = arith.constant 0 : index
      // "int": 64 bytes at offset 0, live [0, 2)
      %int_ = memref.view %_smem[%_c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xi8, #gpu.address_space<workgroup>>
      %_c64 = arith.constant 64 : index
      // "a-b": 32 bytes at offset 64, live [0, 3)
      %a_b = memref.view %_smem[%_c64][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<8xi32, #gpu.address_space<workgroup>>
      // "a_b": 48 bytes at offset 0, live [2, 5)
      %a_b_2 = memref.view %_smem[%_c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<24xi16, #gpu.address_space<workgroup>>
      %_c48 = arith.constant 48 : index
      // "_tmp": 16 bytes at offset 48, live [3, 6)
      %b_tmp = memref.view %_smem[%_c48][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2xf64, #gpu.address_space<workgroup>>
      // 8 bytes at offset 0, live [5, 6)
      %smem_arena = memref.view %_smem[%_c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<8xi8, #gpu.address_space<workgroup>>
      // Barriers by program point (each runs before the accesses there):
      //   point 2: gpu.barrier  // the caller must synchronize here (sync 'none')
      //   point 5: gpu.barrier  // the caller must synchronize here (sync 'none')
      gpu.return
    }
  }
}
