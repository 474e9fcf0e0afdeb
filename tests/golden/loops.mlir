// Shared-memory plan for kernel kernel: status feasible, arena 448 bytes (lower bound 0, naive sum 1344).
// Launch with dynamic_shared_memory_size 448; offsets are bytes from the arena base.
module attributes {gpu.container_module} {
  gpu.module @kernel_plan {
    gpu.func @kernel() kernel {
      %_smem = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %_c0 = arith.constant 0 : index
      // 256 bytes at offset 0, live [1, 3)
      %x = memref.view %_smem[%_c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xi8, #gpu.address_space<workgroup>>
      // 256 bytes at offset 0, live [3, 5)
      %y = memref.view %_smem[%_c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xi8, #gpu.address_space<workgroup>>
      %_c256 = arith.constant 256 : index
      // 128 bytes at offset 256, live [5, 11)
      %z = memref.view %_smem[%_c256][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128xi8, #gpu.address_space<workgroup>>
      // 256 bytes at offset 0, live [6, 8)
      %u = memref.view %_smem[%_c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xi8, #gpu.address_space<workgroup>>
      // 256 bytes at offset 0, live [8, 10)
      %v = memref.view %_smem[%_c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xi8, #gpu.address_space<workgroup>>
      // 128 bytes at offset 256, live [0, 1), [11, 13)
      %w = memref.view %_smem[%_c256][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128xi8, #gpu.address_space<workgroup>>
      %_c384 = arith.constant 384 : index
      // 64 bytes at offset 384, live [10, 13)
      %t = memref.view %_smem[%_c384][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xi8, #gpu.address_space<workgroup>>
      // Control flow and barriers by program point (each barrier runs before the accesses at its point):
      //   scf.for ... {  // loops.0: points [1, 5) repeat, 8 trips
      //     gpu.barrier  // point 1: existing: the plan relies on it; runs every iteration of loops.0; at the back edge
      //     gpu.barrier  // point 3: existing: the plan relies on it; runs every iteration of loops.0
      //   }  // end of loops.0
      //   gpu.barrier  // point 5: existing: the plan relies on it
      //   scf.if ... {  // branches.0 arm 0: points [6, 8)
      //   } else {  // branches.0 arm 1: points [8, 10)
      //   }  // end of branches.0
      //   gpu.barrier  // point 11: existing: the plan relies on it
      gpu.return
    }
  }
}
