//! Epoch-managed pointers: [`Atomic`] (the shared location), [`Owned`] (an allocation
//! nobody else sees yet) and [`Shared`] (a pointer loaded under a [`Guard`], valid for
//! the guard's lifetime `'g`). The subset of crossbeam-epoch's that this workspace uses,
//! with the same names and signatures, without tags or compare-and-swap.
//!
//! [`Pointable`] says how an allocation is made, viewed and freed: `T` is a `Box<T>`;
//! `[MaybeUninit<T>]` is one allocation holding the length and then the elements (a
//! thin pointer to a length-prefixed array).

use std::alloc::{self, Layout};
use std::marker::PhantomData;
use std::mem::{self, MaybeUninit};
use std::ops::{Deref, DerefMut};
use std::ptr;

#[cfg(loom)]
use loom::sync::atomic::AtomicPtr;
#[cfg(not(loom))]
use std::sync::atomic::AtomicPtr;

use super::Guard;
use crate::sync::Ordering;

/// A type an epoch-managed pointer can point to.
pub trait Pointable {
    /// What [`Pointable::init`] builds the object from.
    type Init;

    /// Allocates and initializes an object.
    ///
    /// # Safety
    /// The result is freed with [`Pointable::drop`] only.
    unsafe fn init(init: Self::Init) -> *mut ();

    /// The object at `ptr`.
    ///
    /// # Safety
    /// `ptr` came from [`Pointable::init`], is not freed during `'a`, and nobody has a
    /// mutable reference to it during `'a`.
    unsafe fn deref<'a>(ptr: *mut ()) -> &'a Self;

    /// The object at `ptr`, mutably.
    ///
    /// # Safety
    /// As for `deref`, and nobody else accesses it during `'a`.
    unsafe fn deref_mut<'a>(ptr: *mut ()) -> &'a mut Self;

    /// Drops and frees the object at `ptr`.
    ///
    /// # Safety
    /// `ptr` came from [`Pointable::init`], and nobody uses it afterwards.
    unsafe fn drop(ptr: *mut ());
}

impl<T> Pointable for T {
    type Init = T;

    unsafe fn init(init: T) -> *mut () {
        Box::into_raw(Box::new(init)).cast()
    }

    unsafe fn deref<'a>(ptr: *mut ()) -> &'a T {
        // SAFETY: a live `Box<T>` allocation, shared (our contract).
        unsafe { &*ptr.cast::<T>() }
    }

    unsafe fn deref_mut<'a>(ptr: *mut ()) -> &'a mut T {
        // SAFETY: a live `Box<T>` allocation, exclusive (our contract).
        unsafe { &mut *ptr.cast::<T>() }
    }

    unsafe fn drop(ptr: *mut ()) {
        // SAFETY: from `Box::into_raw` in `init`, freed once (our contract).
        drop(unsafe { Box::from_raw(ptr.cast::<T>()) });
    }
}

/// The allocation of a `[MaybeUninit<T>]`: its length, then the elements.
#[repr(C)]
struct Array<T> {
    len: usize,
    elements: [MaybeUninit<T>; 0],
}

impl<T> Array<T> {
    fn layout(len: usize) -> Layout {
        let elements = Layout::array::<MaybeUninit<T>>(len).expect("array size overflows isize");
        Layout::new::<Self>()
            .extend(elements)
            .expect("array size overflows isize")
            .0
            .pad_to_align()
    }

    /// # Safety
    /// `ptr` came from `init` and is live.
    unsafe fn elements(ptr: *mut ()) -> (*mut MaybeUninit<T>, usize) {
        let array = ptr.cast::<Array<T>>();
        // SAFETY: a live `Array<T>` (our contract); `addr_of_mut!` makes no reference, so
        // the element pointer keeps the whole allocation's provenance.
        unsafe { (ptr::addr_of_mut!((*array).elements).cast(), (*array).len) }
    }
}

impl<T> Pointable for [MaybeUninit<T>] {
    type Init = usize;

    unsafe fn init(len: usize) -> *mut () {
        let layout = Array::<T>::layout(len);
        // SAFETY: the layout is not zero-sized (it holds the length).
        let ptr = unsafe { alloc::alloc(layout) }.cast::<Array<T>>();
        if ptr.is_null() {
            alloc::handle_alloc_error(layout);
        }
        // SAFETY: freshly allocated for an `Array<T>`; the elements stay uninitialized,
        // which `MaybeUninit` allows.
        unsafe { ptr::addr_of_mut!((*ptr).len).write(len) };
        ptr.cast()
    }

    unsafe fn deref<'a>(ptr: *mut ()) -> &'a Self {
        // SAFETY: live and shared during `'a` (our contract); `len` elements follow the
        // header in the allocation (`layout`).
        unsafe {
            let (elements, len) = Array::<T>::elements(ptr);
            std::slice::from_raw_parts(elements, len)
        }
    }

    unsafe fn deref_mut<'a>(ptr: *mut ()) -> &'a mut Self {
        // SAFETY: as in `deref`, and exclusive (our contract); the pointer is derived
        // from the allocation's raw pointer, not from a shared reference.
        unsafe {
            let (elements, len) = Array::<T>::elements(ptr);
            std::slice::from_raw_parts_mut(elements, len)
        }
    }

    unsafe fn drop(ptr: *mut ()) {
        // SAFETY: from `init` with this length (our contract); the elements are
        // `MaybeUninit`, so nothing to drop in them.
        unsafe {
            let len = (*ptr.cast::<Array<T>>()).len;
            alloc::dealloc(ptr.cast(), Array::<T>::layout(len));
        }
    }
}

/// What can be stored into an [`Atomic`]: [`Owned`] and [`Shared`].
pub trait Pointer<T: ?Sized + Pointable> {
    /// The raw pointer, giving up ownership (for `Owned`).
    fn into_ptr(self) -> *mut ();

    /// Rebuilds from [`Pointer::into_ptr`].
    ///
    /// # Safety
    /// `ptr` came from `into_ptr` of the same type (and, for `Owned`, is owned once).
    unsafe fn from_ptr(ptr: *mut ()) -> Self;

    /// The address as an integer (exposing its provenance), giving up ownership.
    fn into_usize(self) -> usize
    where
        Self: Sized,
    {
        self.into_ptr() as usize
    }

    /// Rebuilds from [`Pointer::into_usize`].
    ///
    /// # Safety
    /// As for [`Pointer::from_ptr`].
    unsafe fn from_usize(data: usize) -> Self
    where
        Self: Sized,
    {
        // SAFETY: per our contract; the provenance was exposed by `into_usize`.
        unsafe { Self::from_ptr(data as *mut ()) }
    }
}

/// An owned, not yet shared, epoch-managed allocation (a `Box` for [`Pointable`] types).
pub struct Owned<T: ?Sized + Pointable> {
    data: *mut (),
    _marker: PhantomData<Box<T>>,
}

// SAFETY: an `Owned<T>` is a unique owner, like `Box<T>`.
unsafe impl<T: ?Sized + Pointable + Send> Send for Owned<T> {}
// SAFETY: as for `Box<T>`.
unsafe impl<T: ?Sized + Pointable + Sync> Sync for Owned<T> {}

impl<T> Owned<T> {
    /// Allocates `value`.
    pub fn new(value: T) -> Owned<T> {
        Self::init(value)
    }

    /// The `Box` (the allocation is `T`'s own).
    pub fn into_box(self) -> Box<T> {
        let data = self.into_ptr();
        // SAFETY: `T`'s `Pointable::init` is `Box::into_raw`, and we owned it.
        unsafe { Box::from_raw(data.cast::<T>()) }
    }
}

impl<T: ?Sized + Pointable> Owned<T> {
    /// Allocates an object built from `init`.
    pub fn init(init: T::Init) -> Owned<T> {
        Owned {
            // SAFETY: freed by our drop (or by whoever takes it over through `Pointer`).
            data: unsafe { T::init(init) },
            _marker: PhantomData,
        }
    }

    /// Gives the allocation up to be shared, as a pointer valid for `'g`.
    pub fn into_shared<'g>(self, _guard: &'g Guard) -> Shared<'g, T> {
        // SAFETY: from `into_ptr` of a `Shared`-compatible pointer (same allocation).
        unsafe { Shared::from_ptr(self.into_ptr()) }
    }
}

impl<T: ?Sized + Pointable> Pointer<T> for Owned<T> {
    fn into_ptr(self) -> *mut () {
        let data = self.data;
        mem::forget(self);
        data
    }

    unsafe fn from_ptr(ptr: *mut ()) -> Self {
        Owned {
            data: ptr,
            _marker: PhantomData,
        }
    }
}

impl<T: ?Sized + Pointable> Deref for Owned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: owned, so live and not mutably borrowed elsewhere.
        unsafe { T::deref(self.data) }
    }
}

impl<T: ?Sized + Pointable> DerefMut for Owned<T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: owned and `&mut self`: exclusive.
        unsafe { T::deref_mut(self.data) }
    }
}

impl<T: ?Sized + Pointable> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: owned, from `T::init`, freed once.
        unsafe { T::drop(self.data) }
    }
}

/// A pointer loaded under a guard: the object stays allocated while the guard (`'g`)
/// lives, if it was reachable when loaded. May be null.
pub struct Shared<'g, T: 'g + ?Sized + Pointable> {
    data: *mut (),
    _marker: PhantomData<(&'g (), *const T)>,
}

impl<T: ?Sized + Pointable> Clone for Shared<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized + Pointable> Copy for Shared<'_, T> {}

impl<T: ?Sized + Pointable> PartialEq for Shared<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        self.data == other.data
    }
}

impl<T: ?Sized + Pointable> Eq for Shared<'_, T> {}

impl<T: ?Sized + Pointable> std::fmt::Debug for Shared<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shared({:p})", self.data)
    }
}

impl<T> Shared<'_, T> {
    /// The raw pointer.
    pub fn as_raw(&self) -> *const T {
        self.data.cast_const().cast()
    }
}

impl<'g, T: ?Sized + Pointable> Shared<'g, T> {
    /// The null pointer.
    pub fn null() -> Self {
        Shared {
            data: ptr::null_mut(),
            _marker: PhantomData,
        }
    }

    /// Whether it is null.
    pub fn is_null(&self) -> bool {
        self.data.is_null()
    }

    /// The object.
    ///
    /// # Safety
    /// Not null, and (loaded while reachable under a live guard, or otherwise kept
    /// alive) not freed during `'g`; nobody mutates it then except through interior
    /// mutability.
    pub unsafe fn deref(&self) -> &'g T {
        // SAFETY: per our contract.
        unsafe { T::deref(self.data) }
    }

    /// The object, or `None` for null.
    ///
    /// # Safety
    /// As for [`Shared::deref`], null allowed.
    pub unsafe fn as_ref(&self) -> Option<&'g T> {
        if self.data.is_null() {
            None
        } else {
            // SAFETY: not null; the rest per our contract.
            Some(unsafe { T::deref(self.data) })
        }
    }

    /// Takes ownership of the object.
    ///
    /// # Safety
    /// Not null, and nobody else uses or frees it any more.
    pub unsafe fn into_owned(self) -> Owned<T> {
        debug_assert!(!self.is_null(), "into_owned of a null pointer");
        // SAFETY: per our contract.
        unsafe { Owned::from_ptr(self.data) }
    }
}

impl<T: ?Sized + Pointable> Pointer<T> for Shared<'_, T> {
    fn into_ptr(self) -> *mut () {
        self.data
    }

    unsafe fn from_ptr(ptr: *mut ()) -> Self {
        Shared {
            data: ptr,
            _marker: PhantomData,
        }
    }
}

/// A shared location holding an epoch-managed pointer (or null). Dropping it frees
/// nothing: its owner frees the object (through a guard or directly).
pub struct Atomic<T: ?Sized + Pointable> {
    data: AtomicPtr<()>,
    _marker: PhantomData<*mut T>,
}

// SAFETY: the location hands `T` to other threads (Send) and lets them share it (Sync).
unsafe impl<T: ?Sized + Pointable + Send + Sync> Send for Atomic<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Pointable + Send + Sync> Sync for Atomic<T> {}

impl<T> Atomic<T> {
    /// A location holding a fresh allocation of `value`.
    pub fn new(value: T) -> Atomic<T> {
        Self::from(Owned::new(value))
    }
}

impl<T: ?Sized + Pointable> Atomic<T> {
    /// A null location.
    pub fn null() -> Atomic<T> {
        Self::from_raw(ptr::null_mut())
    }

    fn from_raw(data: *mut ()) -> Atomic<T> {
        Atomic {
            data: AtomicPtr::new(data),
            _marker: PhantomData,
        }
    }

    /// Loads the pointer, valid while `guard` lives.
    pub fn load<'g>(&self, ord: Ordering, _guard: &'g Guard) -> Shared<'g, T> {
        // SAFETY: a pointer of this location's type (stored by `store`/`swap`/`from`).
        unsafe { Shared::from_ptr(self.data.load(ord)) }
    }

    /// Stores `new` (an [`Owned`] becomes shared).
    pub fn store<P: Pointer<T>>(&self, new: P, ord: Ordering) {
        self.data.store(new.into_ptr(), ord);
    }

    /// Stores `new` and returns the previous pointer.
    pub fn swap<'g, P: Pointer<T>>(
        &self,
        new: P,
        ord: Ordering,
        _guard: &'g Guard,
    ) -> Shared<'g, T> {
        // SAFETY: a pointer of this location's type.
        unsafe { Shared::from_ptr(self.data.swap(new.into_ptr(), ord)) }
    }
}

impl<T: ?Sized + Pointable> From<Owned<T>> for Atomic<T> {
    fn from(owned: Owned<T>) -> Self {
        Self::from_raw(owned.into_ptr())
    }
}

impl<T: ?Sized + Pointable> From<Shared<'_, T>> for Atomic<T> {
    fn from(shared: Shared<'_, T>) -> Self {
        Self::from_raw(shared.into_ptr())
    }
}

impl<T: ?Sized + Pointable> Default for Atomic<T> {
    fn default() -> Self {
        Self::null()
    }
}

impl<T: ?Sized + Pointable> std::fmt::Debug for Atomic<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Atomic({:p})", self.data.load(Ordering::Relaxed))
    }
}
