// Shared-memory plan for kernel attention_spill: status optimal, arena 65536 bytes (lower bound 65536, naive sum 114688).
// Launch with dynamic_shared_memory_size 65536; offsets are bytes from the arena base.
module attributes {gpu.container_module} {
  gpu.module @attention_spill_plan {
    gpu.func @attention_spill(%_workspace: memref<?xi8>) kernel {
      %_smem = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %_c0 = arith.constant 0 : index
      // 32768 bytes at offset 0, live [0, 4)
      %Q_s = memref.view %_smem[%_c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16384xf16, #gpu.address_space<workgroup>>
      %_c32768 = arith.constant 32768 : index
      // 32768 bytes at offset 32768, live [0, 4)
      %K_s = memref.view %_smem[%_c32768][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16384xf16, #gpu.address_space<workgroup>>
      // 32768 bytes at offset 0, live [4, 8)
      %O_s = memref.view %_smem[%_c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<8192xf32, #gpu.address_space<workgroup>>
      // Spilled buffers: %_workspace holds 16384 bytes per block.
      %_bx = gpu.block_id x
      %_by = gpu.block_id y
      %_bz = gpu.block_id z
      %_gx = gpu.grid_dim x
      %_gy = gpu.grid_dim y
      %_t0 = arith.muli %_gy, %_bz : index
      %_t1 = arith.addi %_by, %_t0 : index
      %_t2 = arith.muli %_gx, %_t1 : index
      %_block = arith.addi %_bx, %_t2 : index
      %_c16384 = arith.constant 16384 : index
      %_base = arith.muli %_block, %_c16384 : index
      // 16384 bytes at offset 0, live [1, 6)
      %_at_P_s = arith.addi %_base, %_c0 : index
      %P_s = memref.view %_workspace[%_at_P_s][] : memref<?xi8> to memref<4096xf32>
      // Barriers by program point (each runs before the accesses there):
      //   point 4: gpu.barrier  // existing: the plan relies on it
      gpu.return
    }
  }
}
