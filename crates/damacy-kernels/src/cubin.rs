//! The structural check of a CUBIN (an ELF64 CUDA object) and the architecture it is for: what
//! the kernel cache checks files on disk with and the shipped images are checked with.

use crate::kernel::Kernel;

/// ELF `e_machine` of NVIDIA CUDA objects.
pub(crate) const EM_CUDA: u16 = 190;

const ELF64_EHDR: usize = 64;
const ELF64_PHDR: usize = 56;
const ELF64_SHDR: usize = 64;
const SHT_NOBITS: u32 = 8;

fn le_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Whether `[offset, offset + count * entry)` lies inside a file of `len` bytes.
fn table_inside(offset: u64, count: u64, entry: u64, len: usize) -> bool {
    count.checked_mul(entry).and_then(|n| n.checked_add(offset)).is_some_and(|end| end <= len as u64)
}

/// Checks that `image` looks like a complete CUBIN of `kernel`: an ELF64 little-endian object
/// with `e_machine` `EM_CUDA` (190); its program and section header tables and the contents of
/// every section lie inside the image; and the kernel's entry point name appears as a
/// NUL-terminated symbol or section name. This catches truncated, overwritten and misplaced
/// files; it does not prove the code is loadable (the driver decides that).
///
/// # Errors
/// What is wrong, in words.
pub fn check_cubin(image: &[u8], kernel: Kernel) -> std::result::Result<(), &'static str> {
    if image.len() < ELF64_EHDR {
        return Err("shorter than an ELF64 header");
    }
    if image[..4] != *b"\x7fELF" {
        return Err("no ELF magic");
    }
    if image[4] != 2 {
        return Err("not a 64-bit ELF object");
    }
    if image[5] != 1 {
        return Err("not a little-endian ELF object");
    }
    let field16 = |at| le_u16(image, at).ok_or("ELF header cut short");
    let field64 = |at| le_u64(image, at).ok_or("ELF header cut short");
    if field16(18)? != EM_CUDA {
        return Err("ELF machine is not EM_CUDA (190)");
    }
    let (phoff, phentsize, phnum) = (field64(0x20)?, field16(0x36)?, field16(0x38)?);
    let (shoff, shentsize, shnum, shstrndx) = (field64(0x28)?, field16(0x3a)?, field16(0x3c)?, field16(0x3e)?);
    if phnum > 0
        && (usize::from(phentsize) != ELF64_PHDR || !table_inside(phoff, phnum.into(), ELF64_PHDR as u64, image.len()))
    {
        return Err("program header table outside the file");
    }
    if shnum == 0 || usize::from(shentsize) != ELF64_SHDR || shstrndx >= shnum {
        return Err("no usable section header table");
    }
    if !table_inside(shoff, shnum.into(), ELF64_SHDR as u64, image.len()) {
        return Err("section header table outside the file");
    }
    for i in 0..u64::from(shnum) {
        // In range: the whole table was checked to lie inside the image.
        let at = usize::try_from(shoff + i * ELF64_SHDR as u64).map_err(|_| "section header table outside the file")?;
        let kind = le_u32(image, at + 4).ok_or("section header cut short")?;
        let (offset, size) = (
            le_u64(image, at + 0x18).ok_or("section header cut short")?,
            le_u64(image, at + 0x20).ok_or("section header cut short")?,
        );
        if kind != SHT_NOBITS && !table_inside(offset, size, 1, image.len()) {
            return Err("a section's contents lie outside the file");
        }
    }
    let mut name = kernel.name().as_bytes().to_vec();
    name.push(0);
    let named = image.windows(name.len() + 1).any(|w| (w[0] == 0 || w[0] == b'.') && w[1..] == *name.as_slice());
    if !named {
        return Err("the kernel's entry point name is missing");
    }
    Ok(())
}

/// The SM architecture a CUBIN is for, from its ELF header's `e_flags` (`90` for `sm_90`): bits
/// 8–15 in the ELF ABI version 8 objects of CUDA 13, bits 0–7 before. `None` when `image` is not
/// an ELF64 CUDA object.
#[must_use]
pub fn cubin_sm(image: &[u8]) -> Option<u32> {
    if image.len() < ELF64_EHDR || image[..4] != *b"\x7fELF" || le_u16(image, 18)? != EM_CUDA {
        return None;
    }
    let flags = le_u32(image, 0x30)?;
    Some(if image[8] >= 8 { (flags >> 8) & 0xff } else { flags & 0xff })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 CUDA object: header, a NULL section, a string table section holding
    /// `.text.dmc_memcpy\0`, then the section header table.
    fn fake_cubin() -> Vec<u8> {
        let strtab = b"\0.shstrtab\0.text.dmc_memcpy\0";
        let mut b = vec![0u8; ELF64_EHDR];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[6] = 1;
        b[18..20].copy_from_slice(&EM_CUDA.to_le_bytes());
        let str_off = b.len() as u64;
        b.extend_from_slice(strtab);
        let shoff = b.len() as u64;
        b[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        b[0x3c..0x3e].copy_from_slice(&2u16.to_le_bytes());
        b[0x3e..0x40].copy_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&[0u8; 64]); // SHT_NULL
        let mut sh = [0u8; 64];
        sh[4..8].copy_from_slice(&3u32.to_le_bytes()); // SHT_STRTAB
        sh[0x18..0x20].copy_from_slice(&str_off.to_le_bytes());
        sh[0x20..0x28].copy_from_slice(&(strtab.len() as u64).to_le_bytes());
        b.extend_from_slice(&sh);
        b
    }

    #[test]
    fn check_cubin_accepts_a_well_formed_object_and_names_each_defect() {
        let good = fake_cubin();
        assert_eq!(check_cubin(&good, Kernel::Memcpy), Ok(()));
        assert_eq!(check_cubin(&good, Kernel::Lz4Decode), Err("the kernel's entry point name is missing"));
        assert_eq!(check_cubin(&good[..good.len() - 1], Kernel::Memcpy), Err("section header table outside the file"));
        assert_eq!(check_cubin(&good[..40], Kernel::Memcpy), Err("shorter than an ELF64 header"));
        assert_eq!(check_cubin(&[], Kernel::Memcpy), Err("shorter than an ELF64 header"));

        let mut bad = good.clone();
        bad[0] = b'X';
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("no ELF magic"));
        let mut bad = good.clone();
        bad[4] = 1;
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("not a 64-bit ELF object"));
        let mut bad = good.clone();
        bad[5] = 2;
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("not a little-endian ELF object"));
        let mut bad = good.clone();
        bad[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("ELF machine is not EM_CUDA (190)"));
        let mut bad = good.clone();
        bad[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes()); // offset overflows
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("section header table outside the file"));
        let mut bad = good.clone();
        bad[0x3c..0x3e].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("no usable section header table"));
        let mut bad = good.clone();
        bad[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes()); // one program header at offset 0 of size 0
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("program header table outside the file"));
        // A section whose contents run past the end of the file.
        let mut bad = good.clone();
        let sh1 = bad.len() - 64;
        bad[sh1 + 0x20..sh1 + 0x28].copy_from_slice(&4096u64.to_le_bytes());
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Err("a section's contents lie outside the file"));
        // ... which is fine for SHT_NOBITS (.bss-like) sections, which have no file contents.
        bad[sh1 + 4..sh1 + 8].copy_from_slice(&SHT_NOBITS.to_le_bytes());
        assert_eq!(check_cubin(&bad, Kernel::Memcpy), Ok(()));
    }

    #[test]
    fn the_entry_name_must_be_a_whole_name() {
        // `dmc_memcpyX` or `xdmc_memcpy` is not the entry point `dmc_memcpy`.
        let mut image = fake_cubin();
        let at = image.windows(11).position(|w| w == b"dmc_memcpy\0").unwrap();
        image[at + 10] = b'X';
        assert!(check_cubin(&image, Kernel::Memcpy).is_err());
        let mut image = fake_cubin();
        image[at - 1] = b'x';
        assert!(check_cubin(&image, Kernel::Memcpy).is_err());
    }

    #[test]
    fn the_architecture_is_read_from_the_flags_of_either_abi() {
        let mut image = fake_cubin();
        image[8] = 8; // CUDA 13: the SM in bits 8-15
        image[0x30..0x34].copy_from_slice(&0x0600_5a04u32.to_le_bytes());
        assert_eq!(cubin_sm(&image), Some(90));
        image[0x30..0x34].copy_from_slice(&0x0600_5004u32.to_le_bytes());
        assert_eq!(cubin_sm(&image), Some(80));
        image[8] = 7; // before: bits 0-7
        image[0x30..0x34].copy_from_slice(&0x005a_0550u32.to_le_bytes());
        assert_eq!(cubin_sm(&image), Some(0x50));
        image[0x30..0x34].copy_from_slice(&0x0050_055au32.to_le_bytes());
        assert_eq!(cubin_sm(&image), Some(90));
        assert_eq!(cubin_sm(b"not an elf object at all, long enough to hold a header..........."), None);
    }
}
